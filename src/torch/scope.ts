/**
 * Deterministic tensor memory management.
 *
 * The JavaScript garbage collector cannot see libtorch memory (least of all GPU memory),
 * so tensors are freed explicitly:
 *   - `tidy(fn)` disposes every tensor created while fn runs, except what fn returns
 *     (tensors, or arrays / plain objects / Maps holding tensors) and what was `keep()`-ed;
 *     returned tensors move to the enclosing scope.
 *   - `t.dispose()` or `using t = ...` frees one tensor now.
 *   - A FinalizationRegistry frees tensors that became unreachable without being disposed.
 *     It is only a backstop (it runs late and unpredictably); it counts what it frees so
 *     leaks can be reported. Tensors inside a scope skip it (the scope frees them).
 * `liveTensors()` counts native handles, which is what tests assert on.
 */
import { S, loadTorch } from "./native.ts";

/** What the scopes need from a tensor; implemented by Tensor. */
export interface Disposable {
  _h: number;
  _kept: boolean;
  /** Registered with the GC backstop. */
  _gc: boolean;
  dispose(): void;
}

const scopes: Disposable[][] = [];

let backstopEnabled = true;
let freedByGc = 0;

const backstop = new FinalizationRegistry<number>((handle) => {
  freedByGc++;
  S.vt_free(handle);
});

/**
 * Called for every new tensor. Inside a scope the tensor only joins the scope: the scope
 * itself guarantees it is freed or handed on, and registering with the GC backstop costs
 * about a microsecond per tensor, which dominates small-op dispatch. Tensors created
 * outside any scope, returned from the outermost scope, or kept, get the backstop.
 */
export function track(t: Disposable): void {
  const scope = scopes[scopes.length - 1];
  if (scope !== undefined) scope.push(t);
  else guard(t);
}

function guard(t: Disposable): void {
  if (t._gc || !backstopEnabled) return;
  backstop.register(t, t._h, t);
  t._gc = true;
}

/** Called by dispose(): the handle is freed, so the backstop must forget it. */
export function untrack(t: Disposable): void {
  if (t._gc) backstop.unregister(t);
}

/**
 * Runs fn and disposes every tensor it created that is not part of its result.
 * fn must be synchronous: tensors created after an await would escape the scope.
 */
export function tidy<T>(fn: () => T): T {
  scopes.push([]);
  let result: T;
  try {
    result = fn();
  } catch (err) {
    disposeScope(scopes.pop()!, new Set());
    throw err;
  }
  if (result instanceof Promise) {
    disposeScope(scopes.pop()!, new Set());
    throw new TypeError("tidy(fn) needs a synchronous fn; wrap the synchronous tensor work inside it instead");
  }
  const keep = new Set<Disposable>();
  collectTensors(result, keep, 0);
  const scope = scopes.pop()!;
  const parent = scopes[scopes.length - 1];
  // Only tensors this scope created move on: a returned tensor that existed before the
  // scope (a parameter, say) stays where it was.
  for (const t of scope) {
    if (t._kept || t._h === 0) continue;
    if (!keep.has(t)) t.dispose();
    else if (parent !== undefined) parent.push(t);
    else guard(t);
  }
  return result;
}

/** Exempts a tensor from every scope: it lives until disposed explicitly. */
export function keep<T extends Disposable>(t: T): T {
  guard(t);
  t._kept = true;
  return t;
}

function disposeScope(scope: Disposable[], keep: Set<Disposable>): void {
  for (const t of scope) if (!t._kept && !keep.has(t)) t.dispose();
}

function collectTensors(value: unknown, into: Set<Disposable>, depth: number): void {
  if (value === null || typeof value !== "object" || depth > 8) return;
  if (isTensorLike(value)) {
    into.add(value);
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) collectTensors(v, into, depth + 1);
  } else if (value instanceof Map) {
    for (const v of value.values()) collectTensors(v, into, depth + 1);
  } else if (Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collectTensors(v, into, depth + 1);
  }
}

function isTensorLike(value: object): value is Disposable {
  return "_h" in value && "_kept" in value;
}

/** Number of native tensor handles currently alive. */
export function liveTensors(): number {
  loadTorch(); // callable before any tensor exists (a test's baseline)
  return Number(S.vt_live_handles());
}

/** How many tensors the GC backstop has freed (each one a missed dispose). */
export function tensorsFreedByGc(): number {
  return freedByGc;
}

/**
 * Counts tensors from now on: `leaked()` is the handles still alive beyond those alive at
 * the start, plus any this program's GC backstop freed meanwhile (each a missed dispose).
 * Across an `await`, the backstop may free tensors that code run earlier leaked, which
 * lowers `liveTensors()` by as many as it raises `tensorsFreedByGc()`: the two cancel, so
 * a leak check that awaits stays exact. A leak freed by the backstop still counts.
 */
export function tensorLedger(): { leaked(): number } {
  const live = liveTensors();
  const gc = freedByGc;
  return { leaked: () => liveTensors() - live + (freedByGc - gc) };
}

/**
 * Turns the GC backstop on or off for tensors created from now on. Off saves a little
 * per-op time in tight loops whose tensors are all scoped.
 */
export function setGcBackstop(enabled: boolean): void {
  backstopEnabled = enabled;
}
