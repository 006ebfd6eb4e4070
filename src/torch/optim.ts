/**
 * Optimizers (AdamW, SGD), gradient clipping and learning-rate schedules.
 *
 * A step over all parameters is one FFI call: AdamW uses libtorch's fused kernel where it
 * has one (torch >= 2.1 on CUDA, >= 2.4 on CPU) and the multi-tensor "foreach" kernels
 * otherwise. Optimizer state lives in tensors exempt from scopes; `stateDict()` returns
 * them with metadata in a form safetensors.save() writes directly.
 */
import { ptr } from "bun:ffi";
import { ARGS, ARGS_PTR, OUT, OUT_PTR, S, argsAt, check } from "./native.ts";
import { TorchError } from "./errors.ts";
import { Tensor } from "./tensor.ts";
import { keep } from "./scope.ts";
import { zeros, zerosLike } from "./creation.ts";
import { noGrad } from "./autograd.ts";

export interface ParamGroup {
  params: Tensor[];
  /** Overrides the optimizer's lr for this group. */
  lr?: number;
  /** Overrides the optimizer's weight decay for this group. */
  weightDecay?: number;
}

interface Group {
  params: Tensor[];
  lr: number;
  /** lr the schedules scale (the lr the group was created with). */
  initialLr: number;
  weightDecay: number;
}

function toGroups(params: Tensor[] | ParamGroup[], lr: number, weightDecay: number): Group[] {
  if (params.length === 0) throw new TorchError("optimizer got an empty parameter list");
  const groups = params[0] instanceof Tensor ? [{ params: params as Tensor[] }] : (params as ParamGroup[]);
  return groups.map((g) => ({
    params: g.params,
    lr: g.lr ?? lr,
    initialLr: g.lr ?? lr,
    weightDecay: g.weightDecay ?? weightDecay,
  }));
}

/** What stateDict() returns: tensors plus string metadata (safetensors-compatible). */
export interface OptimizerState {
  tensors: Record<string, Tensor>;
  metadata: Record<string, string>;
}

/** Common parts of the optimizers: groups, lr access, zeroGrad, disposal of state. */
abstract class Optimizer {
  readonly groups: Group[];
  /** Number of step() calls so far. */
  stepCount = 0;

  constructor(params: Tensor[] | ParamGroup[], lr: number, weightDecay: number) {
    this.groups = toGroups(params, lr, weightDecay);
  }

  get params(): Tensor[] {
    return this.groups.flatMap((g) => g.params);
  }

  /** The first group's learning rate. */
  get lr(): number {
    return this.groups[0]!.lr;
  }

  /** Sets every group's learning rate. */
  set lr(value: number) {
    for (const g of this.groups) g.lr = value;
  }

  /** Clears gradients (sets them to None, PyTorch's default). */
  zeroGrad(): void {
    for (const p of this.params) p.grad = undefined;
  }

  abstract step(): void;
  abstract stateDict(): OptimizerState;
  abstract loadStateDict(state: { tensors: Map<string, Tensor> | Record<string, Tensor>; metadata: Record<string, string> }): void;
  abstract dispose(): void;

  [Symbol.dispose](): void {
    this.dispose();
  }

  protected baseMetadata(kind: string): Record<string, string> {
    return {
      optimizer: kind,
      step: String(this.stepCount),
      lr: JSON.stringify(this.groups.map((g) => g.lr)),
      initial_lr: JSON.stringify(this.groups.map((g) => g.initialLr)),
    };
  }

  protected loadBaseMetadata(kind: string, metadata: Record<string, string>): void {
    if (metadata.optimizer !== kind) {
      throw new TorchError(`optimizer state is for "${metadata.optimizer}", not ${kind}`);
    }
    this.stepCount = Number(metadata.step ?? 0);
    const lrs = JSON.parse(metadata.lr ?? "[]") as number[];
    const initial = JSON.parse(metadata.initial_lr ?? "[]") as number[];
    this.groups.forEach((g, i) => {
      if (lrs[i] !== undefined) g.lr = lrs[i]!;
      if (initial[i] !== undefined) g.initialLr = initial[i]!;
    });
  }
}

function find(tensors: Map<string, Tensor> | Record<string, Tensor>, name: string): Tensor | undefined {
  return tensors instanceof Map ? tensors.get(name) : tensors[name];
}

function lookup(tensors: Map<string, Tensor> | Record<string, Tensor>, name: string): Tensor {
  const t = find(tensors, name);
  if (t === undefined) throw new TorchError(`optimizer state lacks tensor "${name}"`);
  return t;
}

export interface AdamWOptions {
  lr?: number;
  betas?: readonly [number, number];
  eps?: number;
  weightDecay?: number;
  /** "auto" (default) uses the fused kernel when libtorch has one; false forces foreach. */
  fused?: "auto" | false;
  /**
   * Mixed precision for 16-bit (bf16, f16) parameters, on by default: the moments are f32,
   * and an f32 master copy of the parameter takes the update, the parameter being written
   * from it after each step (PyTorch/verl mixed precision). Without it a bf16 parameter
   * loses every update smaller than its rounding step. false keeps all state in the
   * parameter's dtype.
   */
  f32State?: boolean;
  /**
   * Keep the state in host memory (verl's optimizer_offload): the moments and a master
   * copy of every parameter (f32 for 16-bit ones with f32State, else the parameter's dtype)
   * live on the CPU; a step copies each gradient there, updates the master and writes the
   * parameter from it. A GPU then holds only the weights and their gradients, 4 bytes a
   * bf16 parameter instead of 16. The checkpoint layout is the in-device one's.
   */
  offload?: boolean;
  /** Offloaded: the most elements one FFI call steps (its gradients' host copies); default 64 Mi. */
  offloadChunkElements?: number;
}

/** Parameters per FFI call: four handle lists of this length fit in ARGS. */
const ADAMW_BATCH = Math.floor(ARGS.length / 4);
/**
 * Elements per FFI call when the state is offloaded: a call holds host copies of its
 * gradients, so it is cut to bound that memory (64 Mi elements: 256 MiB of f32).
 */
const OFFLOAD_CHUNK_ELEMENTS = 64 * 1024 * 1024;

function isHalf(t: Tensor): boolean {
  return t.dtype === "bf16" || t.dtype === "f16";
}

/**
 * AdamW with decoupled weight decay (torch.optim.AdamW semantics and defaults): each
 * parameter counts its own steps (a parameter without a gradient is skipped and its count
 * stays), as PyTorch's per-parameter state["step"].
 *
 * State tensors, per group gi and parameter i: `gi.i.exp_avg`, `gi.i.exp_avg_sq` and, for
 * a 16-bit parameter with f32 state, `gi.i.master`; metadata `steps` holds the per-parameter
 * step counts. A state without `steps` (the layout of a single shared count) loads with
 * that count for every parameter; one without masters takes them from the parameters.
 */
export class AdamW extends Optimizer {
  readonly betas: readonly [number, number];
  readonly eps: number;
  readonly fused: "auto" | false;
  readonly f32State: boolean;
  readonly offload: boolean;
  readonly offloadChunkElements: number;
  /** Whether the last step ran the fused kernel for at least one group. */
  lastStepFused = false;
  #expAvg: Tensor[][];
  #expAvgSq: Tensor[][];
  /**
   * f32 master copies of 16-bit parameters (offloaded: of every parameter, in host
   * memory), made from the parameter at its first step.
   */
  #master: (Tensor | undefined)[][];
  /** Per-parameter step counts (the shim increments those it updates). */
  #steps: Float64Array[];

  constructor(params: Tensor[] | ParamGroup[], opts: AdamWOptions = {}) {
    super(params, opts.lr ?? 1e-3, opts.weightDecay ?? 1e-2);
    this.betas = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    this.fused = opts.fused ?? "auto";
    this.f32State = opts.f32State ?? true;
    this.offload = opts.offload ?? false;
    this.offloadChunkElements = opts.offloadChunkElements ?? OFFLOAD_CHUNK_ELEMENTS;
    const moment = (p: Tensor) => keep(this.#stateLike(p));
    this.#expAvg = this.groups.map((g) => g.params.map(moment));
    this.#expAvgSq = this.groups.map((g) => g.params.map(moment));
    this.#master = this.groups.map((g) => g.params.map(() => undefined));
    this.#steps = this.groups.map((g) => new Float64Array(g.params.length));
  }

  /** Whether a checkpoint holds a master copy of `p` (a 16-bit parameter with f32 state). */
  #hasMaster(p: Tensor): boolean {
    return this.f32State && isHalf(p);
  }

  /** Whether `p` is stepped through a master copy (16-bit with f32 state, or offloaded). */
  #stepsMaster(p: Tensor): boolean {
    return this.offload || this.#hasMaster(p);
  }

  /** Zeros shaped as `p` in the state's dtype, on the state's device. */
  #stateLike(p: Tensor): Tensor {
    const dtype = this.#hasMaster(p) ? "f32" : p.dtype;
    return this.offload ? zeros(p.shape, { dtype, device: "cpu" }) : zerosLike(p, { dtype });
  }

  /** A master copy of `p`'s values: f32 for a 16-bit parameter with f32 state, in the state's place. */
  #masterOf(values: Tensor, p: Tensor): Tensor {
    return keep(noGrad(() => this.#stateLike(p).copy_(values)));
  }

  /** Index ranges of a group's parameters, one FFI call each. */
  #calls(params: readonly Tensor[]): [number, number][] {
    const out: [number, number][] = [];
    let start = 0;
    let elements = 0;
    params.forEach((p, i) => {
      const n = p.numel();
      const full = i - start >= ADAMW_BATCH || (this.offload && i > start && elements + n > this.offloadChunkElements);
      if (full) {
        out.push([start, i - start]);
        start = i;
        elements = 0;
      }
      elements += n;
    });
    if (params.length > start) out.push([start, params.length - start]);
    return out;
  }

  /** Step counts of a group's parameters (a copy). */
  paramSteps(group = 0): number[] {
    return Array.from(this.#steps[group]!);
  }

  step(): void {
    this.stepCount++;
    let fused = 0;
    this.groups.forEach((g, gi) => {
      const masters = this.#master[gi]!;
      g.params.forEach((p, i) => {
        if (masters[i] === undefined && this.#stepsMaster(p)) masters[i] = this.#masterOf(p, p);
      });
      for (const [start, n] of this.#calls(g.params)) {
        for (let i = 0; i < n; i++) {
          ARGS[i] = g.params[start + i]!._h;
          ARGS[n + i] = masters[start + i]?._h ?? 0;
          ARGS[2 * n + i] = this.#expAvg[gi]![start + i]!._h;
          ARGS[3 * n + i] = this.#expAvgSq[gi]![start + i]!._h;
        }
        const steps = ptr(this.#steps[gi]!, start * 8);
        const mode = this.fused === "auto" ? 0 : 1;
        check(S.vt_adamw_step(argsAt(0), argsAt(n), argsAt(2 * n), argsAt(3 * n), steps, n, g.lr, this.betas[0], this.betas[1], this.eps, g.weightDecay, mode, OUT_PTR));
        fused += OUT[0]!;
      }
    });
    this.lastStepFused = fused > 0;
  }

  stateDict(): OptimizerState {
    const tensors: Record<string, Tensor> = {};
    this.groups.forEach((g, gi) =>
      g.params.forEach((_, i) => {
        tensors[`${gi}.${i}.exp_avg`] = this.#expAvg[gi]![i]!;
        tensors[`${gi}.${i}.exp_avg_sq`] = this.#expAvgSq[gi]![i]!;
        const master = this.#master[gi]![i];
        // an offloaded f32 parameter's master equals it: the in-device layout has none
        if (master !== undefined && this.#hasMaster(g.params[i]!)) tensors[`${gi}.${i}.master`] = master;
      }),
    );
    const metadata = {
      ...this.baseMetadata("AdamW"),
      betas: JSON.stringify(this.betas),
      eps: String(this.eps),
      steps: JSON.stringify(this.#steps.map((s) => Array.from(s))),
    };
    return { tensors, metadata };
  }

  loadStateDict(state: { tensors: Map<string, Tensor> | Record<string, Tensor>; metadata: Record<string, string> }): void {
    this.loadBaseMetadata("AdamW", state.metadata);
    const steps = state.metadata.steps === undefined ? undefined : (JSON.parse(state.metadata.steps) as number[][]);
    this.groups.forEach((g, gi) => {
      const counts = steps?.[gi];
      if (steps !== undefined && counts?.length !== g.params.length) {
        throw new TorchError(`optimizer state: metadata "steps" has ${counts?.length ?? 0} counts for group ${gi}, expected ${g.params.length}`);
      }
      g.params.forEach((p, i) => {
        this.#expAvg[gi]![i]!.copy_(lookup(state.tensors, `${gi}.${i}.exp_avg`));
        this.#expAvgSq[gi]![i]!.copy_(lookup(state.tensors, `${gi}.${i}.exp_avg_sq`));
        this.#steps[gi]![i] = counts?.[i] ?? this.stepCount;
        const saved = find(state.tensors, `${gi}.${i}.master`);
        this.#master[gi]![i]?.dispose();
        // without a saved master, the next step copies one from the (loaded) parameter
        this.#master[gi]![i] = saved !== undefined && this.#hasMaster(p) ? this.#masterOf(saved, p) : undefined;
      });
    });
  }

  dispose(): void {
    for (const list of [...this.#expAvg, ...this.#expAvgSq, ...this.#master]) for (const t of list) t?.dispose();
  }
}

export interface SGDOptions {
  lr?: number;
  momentum?: number;
  dampening?: number;
  weightDecay?: number;
  nesterov?: boolean;
}

/** Stochastic gradient descent with optional momentum (torch.optim.SGD semantics). */
export class SGD extends Optimizer {
  readonly momentum: number;
  readonly dampening: number;
  readonly nesterov: boolean;
  #buffers: Tensor[][];

  constructor(params: Tensor[] | ParamGroup[], opts: SGDOptions = {}) {
    super(params, opts.lr ?? 1e-3, opts.weightDecay ?? 0);
    this.momentum = opts.momentum ?? 0;
    this.dampening = opts.dampening ?? 0;
    this.nesterov = opts.nesterov ?? false;
    this.#buffers = this.momentum === 0 ? this.groups.map(() => []) : this.groups.map((g) => g.params.map((p) => keep(zerosLike(p))));
  }

  step(): void {
    const first = this.stepCount === 0 ? 1 : 0;
    this.stepCount++;
    this.groups.forEach((g, gi) => {
      const n = g.params.length;
      const bufs = this.#buffers[gi]!;
      for (let i = 0; i < n; i++) {
        ARGS[i] = g.params[i]!._h;
        ARGS[n + i] = bufs[i]?._h ?? 0;
      }
      check(S.vt_sgd_step(argsAt(0), argsAt(n), n, g.lr, this.momentum, this.dampening, g.weightDecay, this.nesterov ? 1 : 0, first));
    });
  }

  stateDict(): OptimizerState {
    const tensors: Record<string, Tensor> = {};
    this.#buffers.forEach((list, gi) => list.forEach((t, i) => (tensors[`${gi}.${i}.momentum_buffer`] = t)));
    return { tensors, metadata: { ...this.baseMetadata("SGD"), momentum: String(this.momentum) } };
  }

  loadStateDict(state: { tensors: Map<string, Tensor> | Record<string, Tensor>; metadata: Record<string, string> }): void {
    this.loadBaseMetadata("SGD", state.metadata);
    this.#buffers.forEach((list, gi) => list.forEach((t, i) => t.copy_(lookup(state.tensors, `${gi}.${i}.momentum_buffer`))));
  }

  dispose(): void {
    for (const list of this.#buffers) for (const t of list) t.dispose();
  }
}

/**
 * Scales gradients in place so their joint norm is at most maxNorm
 * (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping as a 0-d tensor on
 * the gradients' device; reading it (item()) is the only host sync.
 */
export function clipGradNorm(params: readonly Tensor[], maxNorm: number, normType = 2): Tensor {
  for (let i = 0; i < params.length; i++) ARGS[i] = params[i]!._h;
  check(S.vt_clip_grad_norm(ARGS_PTR, params.length, maxNorm, normType, 1, OUT_PTR));
  return new Tensor(OUT[0]!);
}

// ---- learning-rate schedules ----------------------------------------------------------

/** Multiplier of the initial lr at a given step (0-based). */
export type Schedule = (step: number) => number;

/** Constant lr, with an optional linear warmup from 0. */
export function constantSchedule(opts: { warmupSteps?: number } = {}): Schedule {
  const warmup = opts.warmupSteps ?? 0;
  return (step) => (warmup > 0 && step < warmup ? step / warmup : 1);
}

/**
 * Linear warmup to the initial lr, then half a cosine down to minLrRatio x the initial
 * lr at totalSteps (the schedule Hugging Face and verl use).
 */
export function warmupCosineSchedule(opts: { warmupSteps: number; totalSteps: number; minLrRatio?: number; numCycles?: number }): Schedule {
  const { warmupSteps, totalSteps } = opts;
  const minRatio = opts.minLrRatio ?? 0;
  const cycles = opts.numCycles ?? 0.5;
  if (totalSteps <= 0) throw new TorchError(`warmupCosineSchedule: totalSteps must be positive, got ${totalSteps}`);
  return (step) => {
    if (step < warmupSteps) return step / Math.max(1, warmupSteps);
    const progress = Math.min(1, (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps));
    const cosine = Math.max(0, 0.5 * (1 + Math.cos(Math.PI * cycles * 2 * progress)));
    return minRatio + (1 - minRatio) * cosine;
  };
}

/** Applies a schedule to an optimizer: lr = initial lr x schedule(step). */
export class LRScheduler {
  #step = 0;

  constructor(
    readonly optimizer: Optimizer,
    readonly schedule: Schedule,
  ) {
    this.#apply();
  }

  /** Advances one step and updates the optimizer's learning rates. */
  step(): void {
    this.#step++;
    this.#apply();
  }

  get lastStep(): number {
    return this.#step;
  }

  /** Jumps to a step (after resuming from a checkpoint). */
  setStep(step: number): void {
    this.#step = step;
    this.#apply();
  }

  #apply(): void {
    const f = this.schedule(this.#step);
    for (const g of this.optimizer.groups) g.lr = g.initialLr * f;
  }
}

export type { Optimizer };
