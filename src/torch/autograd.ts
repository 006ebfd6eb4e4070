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

// ---- blocks with their own backward: activation checkpointing, custom gradients ----------
//
// A block's output carries a node (ffi/autograd.cpp) that stops the engine and stashes the
// incoming gradient. After the engine's pass, runBlockBackwards() runs every stashed
// block's backward in TypeScript and continues backward from all their inputs in one pass,
// repeating while that pass reaches further blocks. Only the gradient reaches the inputs'
// graph, once, so nothing of it has to be retained.
//
// Limitation: a block's gradient must be complete when its wave runs. A block whose output
// is read both directly and through a later block of the same wave gets the rest of its
// gradient in a later wave, which walks the graph below it a second time (an error unless
// retainGraph). Sibling blocks over one input (chunks of one tensor) are what this serves.

/**
 * A block's backward: the gradient of its output, its inputs (as recorded, with their
 * history) and the RNG states saved at the forward; returns each input's gradient.
 */
type BlockBackward = (gradOutput: Tensor, inputs: Tensor[], rngStates: Tensor[], opts: BackwardOptions) => (Tensor | undefined)[];

const blocks = new Map<number, BlockBackward>();
let nextBlockId = 1;

/** Gives y (computed without grad) a node over inputs whose backward is `backwardFn`. */
function attachBlock(y: Tensor, inputs: readonly Tensor[], rngStates: readonly Tensor[], backwardFn: BlockBackward): Tensor {
  const id = nextBlockId++;
  blocks.set(id, backwardFn);
  inputs.forEach((t, i) => (ARGS[i] = t._h));
  rngStates.forEach((t, i) => (ARGS[inputs.length + i] = t._h));
  check(S.vt_checkpoint_attach(id, y._h, argsAt(0), inputs.length, argsAt(inputs.length), rngStates.length, OUT_PTR));
  return new Tensor(OUT[0]!);
}

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
  dropReleasedBlocks();
  if (S.vt_grad_enabled() === 0) return fn(...inputs);
  const rngDevices = ["cpu", ...new Set(inputs.map((t) => t.device).filter((d) => d !== "cpu"))];
  return tidy(() => {
    const states = rngDevices.map((d) => getRngState(d));
    const y = noGrad(() => fn(...inputs));
    if (!(y instanceof Tensor)) throw new TorchError("checkpoint(fn): fn must return a single Tensor");
    return attachBlock(y, inputs, states, (gradY, recorded, saved, opts) => recompute(fn, rngDevices, recorded, saved, gradY, opts));
  });
}

/**
 * A block with a hand-written backward (torch.autograd.Function): forward(...inputs) runs
 * without recording a graph, and when backward reaches its output, backwardFn(gradOutput,
 * ...inputs) (with grad recording off, inputs detached) returns each input's gradient
 * (undefined for none); backward then continues into the inputs' graphs with them.
 * Without grad recording, or with no input that requires grad, it is just forward.
 */
export function customGrad(
  forward: (...inputs: Tensor[]) => Tensor,
  backwardFn: (gradOutput: Tensor, ...inputs: Tensor[]) => (Tensor | undefined)[],
  ...inputs: Tensor[]
): Tensor {
  loadTorch();
  dropReleasedBlocks();
  if (S.vt_grad_enabled() === 0 || !inputs.some((t) => t.requiresGrad)) return forward(...inputs);
  return tidy(() => {
    const y = noGrad(() => forward(...inputs));
    if (!(y instanceof Tensor)) throw new TorchError("customGrad(forward): forward must return a single Tensor");
    return attachBlock(y, inputs, [], (gradY, recorded) => {
      const grads = noGrad(() => backwardFn(gradY, ...recorded.map((t) => t.detach())));
      if (grads.length !== recorded.length) {
        throw new TorchError(`customGrad: backward returned ${grads.length} gradients for ${recorded.length} inputs`);
      }
      return grads;
    });
  });
}

/** Ids of block nodes libtorch has destroyed: their closures are no longer needed. */
function dropReleasedBlocks(): void {
  for (;;) {
    S.vt_checkpoint_released(OUT.length - 1, OUT_PTR);
    const n = OUT[0]!;
    for (let i = 0; i < n; i++) blocks.delete(OUT[1 + i]!);
    if (n < OUT.length - 1) return;
  }
}

/** One stashed block, popped from the shim. */
interface Stashed {
  id: number;
  gradY: Tensor | undefined;
  inputs: Tensor[];
  rngStates: Tensor[];
}

function popStashed(): Stashed | undefined {
  check(S.vt_checkpoint_pop(OUT.length - 4, OUT_PTR));
  const id = OUT[0]!;
  if (id < 0) return undefined;
  const gradHandle = OUT[1]!;
  const nInputs = OUT[2]!;
  const handles = Array.from(OUT.subarray(4, 4 + nInputs + OUT[3]!));
  return {
    id,
    gradY: gradHandle === 0 ? undefined : new Tensor(gradHandle),
    inputs: handles.slice(0, nInputs).map((h) => new Tensor(h)),
    rngStates: handles.slice(nInputs).map((h) => new Tensor(h)),
  };
}

/**
 * Runs the backward of every block the last pass stashed, then continues backward from
 * all their inputs in one pass; repeats while that pass stashes more blocks.
 */
function runBlockBackwards(opts: BackwardOptions): void {
  while (Number(S.vt_checkpoint_pending()) > 0) {
    tidy(() => {
      const roots: Tensor[] = [];
      const grads: Tensor[] = [];
      for (let entry = popStashed(); entry !== undefined; entry = popStashed()) {
        const backwardFn = blocks.get(entry.id);
        if (backwardFn === undefined) throw new TorchError(`block ${entry.id} reached in backward, but its backward is gone`);
        if (entry.gradY === undefined) continue;
        const inputGrads = backwardFn(entry.gradY, entry.inputs, entry.rngStates, opts);
        entry.inputs.forEach((x, i) => {
          const g = inputGrads[i];
          if (g !== undefined && x.requiresGrad) {
            roots.push(x);
            grads.push(g);
          }
        });
      }
      if (roots.length === 0) return;
      roots.forEach((t, i) => {
        ARGS[i] = t._h;
        ARGS[roots.length + i] = grads[i]!._h;
      });
      try {
        check(S.vt_backward_many(ARGS_PTR, argsAt(roots.length), roots.length, opts.retainGraph ? 1 : 0, opts.createGraph ? 1 : 0));
      } catch (err) {
        if (err instanceof TorchError && !opts.retainGraph && /backward through the graph a second time/.test(err.message)) {
          throw new TorchError(
            `${err.message}\nA checkpoint or customGrad block's input was also reached by backward outside the block, ` +
              "so the graph below it was walked before the block's gradient arrived; call backward with { retainGraph: true } for such a graph",
          );
        }
        throw err;
      }
    });
  }
  if (blocks.size > 0) dropReleasedBlocks();
}

/** A checkpoint's backward: recompute the block from detached inputs and backpropagate through it. */
function recompute(
  fn: (...inputs: Tensor[]) => Tensor,
  rngDevices: readonly string[],
  inputs: Tensor[],
  states: Tensor[],
  gradY: Tensor,
  opts: BackwardOptions,
): (Tensor | undefined)[] {
  const detached = inputs.map((x) => {
    const d = x.detach();
    if (x.requiresGrad && isFloating(x.dtype)) d.requiresGrad_(true);
    return d;
  });
  const current = rngDevices.map((d) => getRngState(d));
  rngDevices.forEach((d, i) => setRngState(states[i]!, d));
  let y: Tensor;
  try {
    y = enableGrad(() => fn(...detached));
  } finally {
    rngDevices.forEach((d, i) => setRngState(current[i]!, d));
  }
  check(S.vt_backward(y._h, gradY._h, 0, opts.createGraph ? 1 : 0));
  return detached.map((d, i) => (inputs[i]!.requiresGrad ? d.grad : undefined));
}

afterBackward.run = runBlockBackwards;

/** Number of checkpointed or custom-gradient blocks whose backward closure is still held (for leak tests). */
export function pendingCheckpoints(): number {
  dropReleasedBlocks();
  return blocks.size;
}
