/**
 * Autograd controls: grad-mode scopes, inference mode, torch.autograd.grad/backward over
 * several tensors, and activation checkpointing.
 */
import { ARGS, ARGS_PTR, OUT, OUT_PTR, S, argsAt, check, loadTorch } from "./native.ts";
import { TorchError } from "./errors.ts";
import { Tensor, afterBackward, type BackwardOptions } from "./tensor.ts";
import { tidy } from "./scope.ts";
import { getRngState, setRngState } from "./random.ts";
import { isFloating } from "./dtype.ts";

function refuseAsync(value: unknown, what: string): void {
  if (value instanceof Promise) {
    throw new TypeError(`${what}(fn) needs a synchronous fn: the mode would end before the awaited work runs`);
  }
}

export function isGradEnabled(): boolean {
  loadTorch();
  return S.vt_grad_enabled() === 1;
}

export function setGradEnabled(enabled: boolean): void {
  loadTorch();
  S.vt_set_grad_enabled(enabled ? 1 : 0);
}

function withGradMode<T>(enabled: boolean, fn: () => T, what: string): T {
  loadTorch();
  const previous = S.vt_grad_enabled();
  S.vt_set_grad_enabled(enabled ? 1 : 0);
  try {
    const r = fn();
    refuseAsync(r, what);
    return r;
  } finally {
    S.vt_set_grad_enabled(previous);
  }
}

/** Runs fn without recording operations for autograd (torch.no_grad). */
export function noGrad<T>(fn: () => T): T {
  return withGradMode(false, fn, "noGrad");
}

/** Runs fn with autograd recording on, even inside noGrad (torch.enable_grad). */
export function enableGrad<T>(fn: () => T): T {
  return withGradMode(true, fn, "enableGrad");
}

/**
 * Runs fn in inference mode (torch.inference_mode): no autograd bookkeeping at all, the
 * fastest way to run a model forward. Tensors created inside cannot be used in autograd
 * later.
 */
export function inferenceMode<T>(fn: () => T): T {
  loadTorch();
  check(S.vt_inference_mode_enter(1, OUT_PTR));
  const guard = OUT[0]!;
  try {
    const r = fn();
    refuseAsync(r, "inferenceMode");
    return r;
  } finally {
    S.vt_inference_mode_exit(guard);
  }
}

export function isInferenceMode(): boolean {
  loadTorch();
  return S.vt_is_inference_mode() === 1;
}

/**
 * Gradients of `outputs` with respect to `inputs` (torch.autograd.grad), without
 * accumulating into .grad. An input the outputs do not depend on gets undefined.
 */
export function grad(
  outputs: Tensor | readonly Tensor[],
  inputs: readonly Tensor[],
  opts: BackwardOptions & { gradOutputs?: readonly (Tensor | undefined)[] } = {},
): (Tensor | undefined)[] {
  const outs = Array.isArray(outputs) ? (outputs as readonly Tensor[]) : [outputs as Tensor];
  const nOut = outs.length;
  const nIn = inputs.length;
  outs.forEach((t, i) => {
    ARGS[i] = t._h;
    ARGS[nOut + i] = opts.gradOutputs?.[i]?._h ?? 0;
  });
  inputs.forEach((t, i) => (ARGS[2 * nOut + i] = t._h));
  check(S.vt_autograd_grad(argsAt(0), argsAt(nOut), nOut, argsAt(2 * nOut), nIn, opts.retainGraph ? 1 : 0, opts.createGraph ? 1 : 0, OUT_PTR));
  const result: (Tensor | undefined)[] = [];
  for (let i = 0; i < nIn; i++) result.push(OUT[i] === 0 ? undefined : new Tensor(OUT[i]!));
  return result;
}

/** torch.autograd.backward: backpropagates from several roots at once. */
export function backward(tensors: readonly Tensor[], grads?: readonly (Tensor | undefined)[], opts: BackwardOptions = {}): void {
  const n = tensors.length;
  tensors.forEach((t, i) => {
    ARGS[i] = t._h;
    ARGS[n + i] = grads?.[i]?._h ?? 0;
  });
  check(S.vt_backward_many(argsAt(0), argsAt(n), n, opts.retainGraph ? 1 : 0, opts.createGraph ? 1 : 0));
  afterBackward.run(opts);
}

// ---- activation checkpointing --------------------------------------------------------

interface Checkpointed {
  fn: (...inputs: Tensor[]) => Tensor;
  /** Devices whose default RNG state was saved (restored before the recompute). */
  rngDevices: string[];
}

const checkpointed = new Map<number, Checkpointed>();
let nextCheckpointId = 1;

/**
 * Runs fn(...inputs) without keeping its activations; during backward the block is run
 * again with grad enabled and backpropagated then (torch.utils.checkpoint). Trades compute
 * for memory so that large models fit. The default RNG states are saved and restored so
 * dropout inside fn draws the same masks in the recompute.
 *
 * fn must be a pure function of its inputs and of parameters it closes over. Gradients
 * reach tensors among `inputs` and parameters used by fn; other tensors that require grad
 * and are captured by fn from outside receive gradients from the recompute too.
 */
export function checkpoint(fn: (...inputs: Tensor[]) => Tensor, ...inputs: Tensor[]): Tensor {
  loadTorch();
  dropReleasedCheckpoints();
  if (S.vt_grad_enabled() === 0) return fn(...inputs);
  const id = nextCheckpointId++;
  const rngDevices = ["cpu", ...new Set(inputs.map((t) => t.device).filter((d) => d !== "cpu"))];
  return tidy(() => {
    const states = rngDevices.map((d) => getRngState(d));
    const y = noGrad(() => fn(...inputs));
    if (!(y instanceof Tensor)) throw new TorchError("checkpoint(fn): fn must return a single Tensor");
    checkpointed.set(id, { fn, rngDevices });
    inputs.forEach((t, i) => (ARGS[i] = t._h));
    states.forEach((t, i) => (ARGS[inputs.length + i] = t._h));
    check(S.vt_checkpoint_attach(id, y._h, argsAt(0), inputs.length, argsAt(inputs.length), states.length, OUT_PTR));
    return new Tensor(OUT[0]!);
  });
}

/** Ids of checkpoint nodes libtorch has destroyed: their closures are no longer needed. */
function dropReleasedCheckpoints(): void {
  for (;;) {
    S.vt_checkpoint_released(OUT.length - 1, OUT_PTR);
    const n = OUT[0]!;
    for (let i = 0; i < n; i++) checkpointed.delete(OUT[1 + i]!);
    if (n < OUT.length - 1) return;
  }
}

/** Recomputes stashed checkpoint blocks, latest first, until backward is complete. */
function runCheckpointRecomputes(opts: BackwardOptions): void {
  if (Number(S.vt_checkpoint_pending()) === 0) {
    if (checkpointed.size > 0) dropReleasedCheckpoints();
    return;
  }
  for (;;) {
    check(S.vt_checkpoint_pop(OUT.length - 4, OUT_PTR));
    const id = OUT[0]!;
    if (id < 0) break;
    const gradHandle = OUT[1]!;
    const nInputs = OUT[2]!;
    const nExtras = OUT[3]!;
    const handles = Array.from(OUT.subarray(4, 4 + nInputs + nExtras));
    tidy(() => {
      const gradY = gradHandle === 0 ? undefined : new Tensor(gradHandle);
      const inputs = handles.slice(0, nInputs).map((h) => new Tensor(h));
      const states = handles.slice(nInputs).map((h) => new Tensor(h));
      const entry = checkpointed.get(id);
      if (entry === undefined) throw new TorchError(`checkpoint ${id} reached in backward, but its block is gone`);
      if (gradY === undefined) return;
      recomputeAndBackprop(entry, inputs, states, gradY, opts);
    });
  }
  dropReleasedCheckpoints();
}

function recomputeAndBackprop(entry: Checkpointed, inputs: Tensor[], states: Tensor[], gradY: Tensor, opts: BackwardOptions): void {
  const detached = inputs.map((x) => {
    const d = x.detach();
    if (x.requiresGrad && isFloating(x.dtype)) d.requiresGrad_(true);
    return d;
  });
  const current = entry.rngDevices.map((d) => getRngState(d));
  entry.rngDevices.forEach((d, i) => setRngState(states[i]!, d));
  let y: Tensor;
  try {
    y = enableGrad(() => entry.fn(...detached));
  } finally {
    entry.rngDevices.forEach((d, i) => setRngState(current[i]!, d));
  }
  check(S.vt_backward(y._h, gradY._h, 0, opts.createGraph ? 1 : 0));
  // Continue backward into the graph that produced the block's inputs.
  const roots: Tensor[] = [];
  const grads: Tensor[] = [];
  detached.forEach((d, i) => {
    if (!inputs[i]!.requiresGrad) return;
    const g = d.grad;
    if (g !== undefined) {
      roots.push(inputs[i]!);
      grads.push(g);
    }
  });
  if (roots.length === 0) return;
  roots.forEach((t, i) => {
    ARGS[i] = t._h;
    ARGS[roots.length + i] = grads[i]!._h;
  });
  check(S.vt_backward_many(ARGS_PTR, argsAt(roots.length), roots.length, opts.retainGraph ? 1 : 0, opts.createGraph ? 1 : 0));
}

afterBackward.run = runCheckpointRecomputes;

/** Number of checkpointed blocks whose recompute closure is still held (for leak tests). */
export function pendingCheckpoints(): number {
  dropReleasedCheckpoints();
  return checkpointed.size;
}
