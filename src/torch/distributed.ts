/**
 * Process groups: several processes (one per GPU, on one machine or several) joined
 * through libtorch's own c10d backends, for data-parallel rollouts and updates.
 *
 *   const pg = torch.distributed.processGroupFromEnv();   // torchrun's variables
 *   pg.allReduce(grad, "avg");                             // in place, blocking
 *   pg.dispose();
 *
 * A TCPStore (rank 0 serves it at masterAddr:masterPort) is the rendezvous; Gloo (CPU
 * tensors, every build) or NCCL (CUDA tensors, CUDA builds compiled with nccl.h) runs the
 * collectives. Every call blocks until it is done on this rank and waits at most the
 * group's timeout: a peer that died or never joins the collective becomes a
 * DistributedError (a TorchError with c10d's message) instead of a hang. After a failed
 * collective the group refuses further collectives (its peers disagree on what ran);
 * dispose it and end the process. Every rank must call the same collectives in the same
 * order with tensors of the same shape and dtype.
 *
 * The one exception to "every call blocks" is the gradient reducer
 * (`pg.gradientReducer(params)`, DDP's bucketed all-reduce): its hooks launch the
 * all-reduces while a backward pass runs, and its `finish()` is the blocking wait.
 */
import { ptr, type Pointer } from "bun:ffi";
import { TorchError } from "./errors.ts";
import { ARGS, ARGS_PTR, OUT, OUT_PTR, S, loadTorch } from "./native.ts";
import { Tensor } from "./tensor.ts";
import { DTYPE_SIZE, isFloating } from "./dtype.ts";
import { deviceCount } from "./cuda.ts";

export type Backend = "gloo" | "nccl";
export type ReduceOp = "sum" | "avg" | "max" | "min";

const BACKEND_CODE: Record<Backend, number> = { gloo: 0, nccl: 1 };
const REDUCE_CODE: Record<ReduceOp, number> = { sum: 0, avg: 1, max: 2, min: 3 };

/** PyTorch's default for process groups: 30 minutes. */
export const DEFAULT_TIMEOUT_MS = 30 * 60 * 1000;
/** torchrun's default MASTER_PORT. */
export const DEFAULT_MASTER_PORT = 29500;

export interface ProcessGroupOptions {
  backend: Backend;
  /** Address of rank 0, which serves the rendezvous store. */
  masterAddr: string;
  /** Port of the store on rank 0; 0 (any free port) only for a world of one. */
  masterPort: number;
  rank: number;
  worldSize: number;
  /** How long a collective or a store read may wait (default 30 minutes). */
  timeoutMs?: number;
  /**
   * How long joining may wait for every rank to reach the store (default: timeoutMs).
   * Ranks start at different times (model loading, a slow node); a long init timeout
   * with a short collective timeout finds dead peers fast without failing slow starts.
   */
  initTimeoutMs?: number;
  /** This rank's index on its machine (default: rank). NCCL's device defaults to it. */
  localRank?: number;
  /** NCCL: the CUDA device of this rank, made current (default: localRank). */
  device?: number;
  /**
   * Gloo: the network interface(s) the peers connect over, comma-separated (default:
   * $GLOO_SOCKET_IFNAME; else the loopback address when masterAddr is a loopback
   * address; else the address this host's name resolves to).
   */
  glooInterface?: string;
}

/** A failed collective, store call or init, naming the op, the rank and the group's size. */
export class DistributedError extends TorchError {
  constructor(
    readonly op: string,
    readonly rank: number,
    readonly worldSize: number,
    readonly backend: Backend,
    readonly reason: string,
    context: string,
  ) {
    super(`${op} failed on rank ${rank} of ${worldSize} (${backend}${context}): ${reason}`);
    this.name = "DistributedError";
  }
}

/** Which backends this shim was compiled with (NCCL: a CUDA libtorch 2.x and nccl.h at build time). */
export function availableBackends(): { gloo: boolean; nccl: boolean } {
  loadTorch();
  if (S.vt_dist_backends(OUT_PTR) !== 0) return { gloo: false, nccl: false };
  return { gloo: OUT[0] === 1, nccl: OUT[1] === 1 };
}

function cstr(s: string): Pointer {
  return Buffer.from(`${s}\0`) as unknown as Pointer;
}

function lastError(): string {
  return String(S.vt_last_error());
}

function isLoopback(addr: string): boolean {
  return addr === "localhost" || addr === "::1" || /^127\.\d+\.\d+\.\d+$/.test(addr);
}

function checkInt(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new TorchError(`initProcessGroup: ${name} must be an integer in [${min}, ${max}], got ${value}`);
  }
}

/** The Gloo device spec of ffi/dist.cpp: "iface:<names>", "host:<address>" or "" (default). */
function glooDeviceSpec(opts: ProcessGroupOptions): string {
  const iface = opts.glooInterface ?? process.env.GLOO_SOCKET_IFNAME;
  if (iface) return `iface:${iface}`;
  if (isLoopback(opts.masterAddr)) return `host:${opts.masterAddr === "localhost" ? "127.0.0.1" : opts.masterAddr}`;
  return "";
}

/**
 * Joins a process group: rank 0 serves the rendezvous store at masterAddr:masterPort
 * and every rank waits until all `worldSize` have reached it (at most initTimeoutMs);
 * then the backend connects every rank to every other. Throws a DistributedError naming
 * the phase that failed.
 */
export function initProcessGroup(opts: ProcessGroupOptions): ProcessGroup {
  loadTorch();
  const { backend, masterAddr, rank, worldSize } = opts;
  if (!Object.hasOwn(BACKEND_CODE, backend)) throw new TorchError(`initProcessGroup: unknown backend "${backend}" (expected "gloo" or "nccl")`);
  if (typeof masterAddr !== "string" || masterAddr === "") throw new TorchError("initProcessGroup: masterAddr must be a host name or address");
  checkInt("worldSize", worldSize, 1);
  checkInt("rank", rank, 0, worldSize - 1);
  checkInt("masterPort", opts.masterPort, worldSize === 1 ? 0 : 1, 65535);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  checkInt("timeoutMs", timeoutMs, 1);
  const initTimeoutMs = opts.initTimeoutMs ?? timeoutMs;
  checkInt("initTimeoutMs", initTimeoutMs, 1);
  const localRank = opts.localRank ?? rank;
  checkInt("localRank", localRank, 0);
  const device = backend === "nccl" ? (opts.device ?? localRank) : -1;
  checkInt("device", device, -1);

  const available = availableBackends();
  const fail = (what: string, cause: string): never => {
    throw new DistributedError("initProcessGroup", rank, worldSize, backend, cause, `, master ${masterAddr}:${opts.masterPort}, init timeout ${initTimeoutMs} ms, ${what}`);
  };
  if (!available[backend]) {
    const needs =
      backend === "nccl"
        ? "it needs a CUDA libtorch 2.x and nccl.h when the shim is compiled, and VAGEN_NCCL unset"
        : "it needs Gloo's headers when the shim is compiled (Debian: libgloo-dev), and VAGEN_GLOO unset";
    fail("checking the backend", `this libtorch shim was built without ${backend} (${needs})`);
  }
  if (S.vt_dist_store_new(cstr(masterAddr), opts.masterPort, worldSize, rank, initTimeoutMs, OUT_PTR) !== 0) {
    fail(rank === 0 ? "serving the store and waiting for the other ranks" : "joining the store and waiting for the other ranks", lastError());
  }
  const store = OUT[0]!;
  const port = OUT[1]!;
  if (S.vt_dist_pg_new(store, BACKEND_CODE[backend], rank, worldSize, timeoutMs, device, cstr(backend === "gloo" ? glooDeviceSpec(opts) : ""), OUT_PTR) !== 0) {
    const cause = lastError();
    S.vt_dist_store_free(store);
    fail(`connecting the ${backend} group`, cause);
  }
  const group = OUT[0]!;
  check(S.vt_dist_pg_info(group, OUT_PTR));
  return new ProcessGroup(store, group, { backend, rank, size: worldSize, localRank, device: OUT[3]!, timeoutMs, masterAddr, masterPort: port });
}

function check(status: number): void {
  if (status !== 0) throw new TorchError(lastError());
}

type Env = Record<string, string | undefined>;

function envInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new TorchError(`processGroupFromEnv: ${name}="${raw}" is not a non-negative integer`);
  return Number(raw.trim());
}

/**
 * initProcessGroup from torchrun's variables: MASTER_ADDR (default 127.0.0.1),
 * MASTER_PORT (29500), WORLD_SIZE (1), RANK (0), LOCAL_RANK (RANK), and Gloo's
 * GLOO_SOCKET_IFNAME. The backend defaults to NCCL when the shim has it and a GPU is
 * visible, else Gloo; `overrides` win over the environment (`env` replaces process.env,
 * for tests).
 */
export function processGroupFromEnv(overrides: Partial<ProcessGroupOptions> & { env?: Env } = {}): ProcessGroup {
  const { env = process.env, ...given } = overrides;
  const rest = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as Partial<ProcessGroupOptions>;
  loadTorch();
  const rank = envInt(env, "RANK", 0);
  const backend: Backend = rest.backend ?? (availableBackends().nccl && deviceCount() > 0 ? "nccl" : "gloo");
  return initProcessGroup({
    masterAddr: env.MASTER_ADDR || "127.0.0.1",
    masterPort: envInt(env, "MASTER_PORT", DEFAULT_MASTER_PORT),
    worldSize: envInt(env, "WORLD_SIZE", 1),
    rank,
    localRank: envInt(env, "LOCAL_RANK", rank),
    glooInterface: env.GLOO_SOCKET_IFNAME || undefined,
    ...rest,
    backend,
  });
}

interface GroupInfo {
  backend: Backend;
  rank: number;
  size: number;
  localRank: number;
  device: number;
  timeoutMs: number;
  masterAddr: string;
  masterPort: number;
}

/** A joined process group. Every method blocks; see the module comment for errors. */
export class ProcessGroup {
  readonly backend: Backend;
  /** This process's rank, 0 .. size - 1. */
  readonly rank: number;
  /** The number of ranks (world size). */
  readonly size: number;
  readonly localRank: number;
  /** NCCL: this rank's CUDA device; -1 for Gloo. */
  readonly device: number;
  readonly timeoutMs: number;
  readonly masterAddr: string;
  /** The store's port (the one chosen when masterPort was 0). */
  readonly masterPort: number;
  #store: number;
  #group: number;
  #broken: string | undefined;

  /** @internal Use initProcessGroup() or processGroupFromEnv(). */
  constructor(store: number, group: number, info: GroupInfo) {
    this.#store = store;
    this.#group = group;
    this.backend = info.backend;
    this.rank = info.rank;
    this.size = info.size;
    this.localRank = info.localRank;
    this.device = info.device;
    this.timeoutMs = info.timeoutMs;
    this.masterAddr = info.masterAddr;
    this.masterPort = info.masterPort;
  }

  get disposed(): boolean {
    return this.#group === 0;
  }

  #error(op: string, cause: string): DistributedError {
    return new DistributedError(op, this.rank, this.size, this.backend, cause, `, timeout ${this.timeoutMs} ms`);
  }

  /** Checks the group is usable for a collective. */
  #ready(op: string): number {
    if (this.#group === 0) throw this.#error(op, "the process group was disposed");
    if (this.#broken !== undefined) throw this.#error(op, `the process group is unusable after an earlier failure (${this.#broken})`);
    return this.#group;
  }

  /** A collective's status: a failure breaks the group for later collectives. */
  #collective(op: string, status: number): void {
    if (status === 0) return;
    const cause = lastError();
    this.#broken = `${op}: ${cause}`;
    throw this.#error(op, cause);
  }

  #tensor(op: string, t: Tensor, what = "tensor"): number {
    if (!(t instanceof Tensor)) throw this.#error(op, `${what} is not a Tensor`);
    if (t._h === 0) throw this.#error(op, `${what} was disposed`);
    return t._h;
  }

  #putHandles(op: string, tensors: readonly Tensor[]): number {
    if (tensors.length > ARGS.length) throw this.#error(op, `more than ${ARGS.length} tensors`);
    for (let i = 0; i < tensors.length; i++) ARGS[i] = this.#tensor(op, tensors[i]!, `tensor ${i}`);
    return tensors.length;
  }

  /** The reduce op's code, refusing avg of a non-floating tensor (checked before anything is sent). */
  #op(op: string, reduce: ReduceOp, tensors: readonly Tensor[]): number {
    const code = Object.hasOwn(REDUCE_CODE, reduce) ? REDUCE_CODE[reduce] : undefined;
    if (code === undefined) throw this.#error(op, `unknown reduce op "${reduce}" (expected sum, avg, max or min)`);
    if (reduce === "avg") {
      for (const t of tensors) {
        if (t instanceof Tensor && !isFloating(t.dtype)) throw this.#error(op, `avg needs a floating tensor, got ${t.dtype} (use sum and divide)`);
      }
    }
    return code;
  }

  /** In place: `t` becomes the reduction of every rank's `t` (avg needs a floating dtype). */
  allReduce(t: Tensor, op: ReduceOp = "sum"): void {
    const name = `allReduce(${op})`;
    const g = this.#ready(name);
    const h = this.#tensor(name, t);
    this.#collective(name, S.vt_dist_all_reduce(g, h, this.#op(name, op, [t])));
  }

  /**
   * allReduce of many tensors at once: those of one dtype and device are flattened into
   * one buffer, reduced with one collective, and written back in place.
   */
  allReduceCoalesced(tensors: readonly Tensor[], op: ReduceOp = "sum"): void {
    const name = `allReduceCoalesced(${op})`;
    const g = this.#ready(name);
    if (tensors.length === 0) return;
    const code = this.#op(name, op, tensors);
    const n = this.#putHandles(name, tensors);
    this.#collective(name, S.vt_dist_all_reduce_coalesced(g, ARGS_PTR, n, code));
  }

  /** Every rank's `t` (same shape and dtype everywhere), as new tensors indexed by rank. */
  allGather(t: Tensor): Tensor[] {
    const name = "allGather";
    const g = this.#ready(name);
    if (this.size > OUT.length) throw this.#error(name, `a group of more than ${OUT.length} ranks`);
    this.#collective(name, S.vt_dist_all_gather(g, this.#tensor(name, t), OUT_PTR));
    const out: Tensor[] = [];
    for (let r = 0; r < this.size; r++) out.push(new Tensor(OUT[r]!));
    return out;
  }

  /** In place: every rank's `t` becomes rank `root`'s. */
  broadcast(t: Tensor, root = 0): void {
    const name = `broadcast(root ${root})`;
    const g = this.#ready(name);
    if (!Number.isInteger(root) || root < 0 || root >= this.size) throw this.#error(name, `root must be a rank in [0, ${this.size - 1}]`);
    this.#collective(name, S.vt_dist_broadcast(g, this.#tensor(name, t), root));
  }

  /**
   * In place: `out` becomes the reduction over all ranks of their `inputs[this.rank]`.
   * `inputs` holds one tensor per rank, each shaped like `out`. NCCL runs it natively;
   * Gloo all-reduces every input and keeps this rank's (size times the traffic).
   */
  reduceScatter(out: Tensor, inputs: readonly Tensor[], op: ReduceOp = "sum"): void {
    const name = `reduceScatter(${op})`;
    const g = this.#ready(name);
    if (inputs.length !== this.size) throw this.#error(name, `needs one input per rank (${this.size}), got ${inputs.length}`);
    const outHandle = this.#tensor(name, out, "out");
    const n = this.#putHandles(name, inputs);
    const shape = out.shape.join(", ");
    for (const [r, t] of inputs.entries()) {
      if (t.shape.join(", ") !== shape || t.dtype !== out.dtype) {
        throw this.#error(name, `input ${r} is ${t.dtype} [${t.shape.join(", ")}], the output ${out.dtype} [${shape}]`);
      }
    }
    const code = this.#op(name, op, [out]);
    this.#collective(name, S.vt_dist_reduce_scatter(g, outHandle, ARGS_PTR, n, code));
  }

  /**
   * A reducer that sums the gradients of `params` over the ranks while the backward pass
   * runs (see GradientReducer). Every rank must create it over the same parameters in the
   * same order. At most one reducer per parameter at a time.
   */
  gradientReducer(params: readonly Tensor[], opts: GradientReducerOptions = {}): GradientReducer {
    const name = "gradientReducer";
    const g = this.#ready(name);
    if (params.length === 0) throw this.#error(name, "no parameters");
    const bucketBytes = opts.bucketBytes ?? DEFAULT_BUCKET_BYTES;
    if (!Number.isInteger(bucketBytes) || bucketBytes < 1) throw this.#error(name, `bucketBytes must be a positive integer, got ${bucketBytes}`);
    if (opts.owner && opts.owner.length !== params.length) throw this.#error(name, `owner has ${opts.owner.length} ranks for ${params.length} parameters`);
    const n = this.#putHandles(name, params);
    const owner = opts.owner ? Float64Array.from(opts.owner) : undefined;
    const bucketOf = new Float64Array(n);
    const status = S.vt_dist_reducer_new(g, ARGS_PTR, n, bucketBytes, owner ? ptr(owner) : null, OUT_PTR, ptr(bucketOf));
    // Nothing was sent: a refusal here (a parameter that is not a leaf) leaves the group usable.
    if (status !== 0) throw this.#error(name, lastError());
    const handle = OUT[0]!;
    const buckets: number[][] = Array.from({ length: OUT[1]! }, () => []);
    bucketOf.forEach((b, i) => buckets[b]!.push(i));
    return new GradientReducer(handle, buckets, {
      ready: (op) => this.#ready(op),
      collective: (op, status) => this.#collective(op, status),
    });
  }

  /** Returns once every rank has reached it. */
  barrier(): void {
    const g = this.#ready("barrier");
    this.#collective("barrier", S.vt_dist_barrier(g));
  }

  /** Writes `value` under `key` in the rendezvous store (any rank; the last write wins). */
  storeSet(key: string, value: Uint8Array | string): void {
    const name = `storeSet("${key}")`;
    if (this.#store === 0) throw this.#error(name, "the process group was disposed");
    const bytes = typeof value === "string" ? new TextEncoder().encode(value) : value;
    const data = bytes.length > 0 ? (bytes as unknown as Pointer) : null;
    if (S.vt_dist_store_set(this.#store, cstr(key), data, bytes.length) !== 0) throw this.#error(name, lastError());
  }

  /** Reads `key` from the store, waiting until some rank has set it (at most timeoutMs, default the group's). */
  storeGet(key: string, timeoutMs = this.timeoutMs): Uint8Array {
    const name = `storeGet("${key}")`;
    if (this.#store === 0) throw this.#error(name, "the process group was disposed");
    if (S.vt_dist_store_get(this.#store, cstr(key), timeoutMs, OUT_PTR) !== 0) throw this.#error(name, lastError());
    const handle = OUT[0]!;
    const out = new Uint8Array(OUT[1]!);
    try {
      if (out.length > 0) check(S.vt_dist_bytes_read(handle, out as unknown as Pointer, out.length));
    } finally {
      S.vt_dist_bytes_free(handle);
    }
    return out;
  }

  /** Deletes `key` from the store; whether it was there. */
  storeDelete(key: string): boolean {
    const name = `storeDelete("${key}")`;
    if (this.#store === 0) throw this.#error(name, "the process group was disposed");
    if (S.vt_dist_store_delete(this.#store, cstr(key), OUT_PTR) !== 0) throw this.#error(name, lastError());
    return OUT[0] === 1;
  }

  /**
   * Frees the group and its store. Rank 0 serves the store: dispose it last (after a
   * barrier), or the others' store calls fail. On Gloo this waits for queued work, up
   * to the timeout when a peer is gone.
   */
  dispose(): void {
    if (this.#group !== 0) S.vt_dist_pg_free(this.#group);
    if (this.#store !== 0) S.vt_dist_store_free(this.#store);
    this.#group = 0;
    this.#store = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** DDP's default bucket size: 25 MiB. */
export const DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024;

/**
 * The buckets a gradient reducer over `params` makes (the shim's rule, written out so that
 * ZeRO can deal parameters to ranks bucket by bucket before the reducer exists): in reverse
 * order, a new bucket when the cap would be passed or the dtype or device changes; a
 * parameter larger than the cap gets one of its own. Each bucket's indices ascend.
 */
export function gradientBuckets(params: readonly Pick<Tensor, "dtype" | "device" | "numel">[], bucketBytes: number): number[][] {
  const buckets: number[][] = [];
  let bytes = 0;
  for (let i = params.length - 1; i >= 0; i--) {
    const p = params[i]!;
    const size = p.numel() * DTYPE_SIZE[p.dtype];
    const head = buckets.length ? params[buckets.at(-1)![0]!]! : undefined;
    if (!head || head.dtype !== p.dtype || head.device !== p.device || bytes + size > bucketBytes) {
      buckets.push([]);
      bytes = 0;
    }
    buckets.at(-1)!.unshift(i);
    bytes += size;
  }
  return buckets;
}

export interface GradientReducerOptions {
  /** A bucket's size cap in bytes (default 25 MiB, as DDP); a larger parameter gets a bucket of its own. */
  bucketBytes?: number;
  /**
   * Each parameter's owner, the rank that steps it (ZeRO stage 2; default: none, every
   * rank keeps every sum). A rank then keeps the reduced gradients of its own parameters
   * only (the others are freed once their bucket is flattened, and stay undefined), and
   * each bucket is reduce-scattered: laid out by owner, each owner's segment padded to the
   * bucket's largest, every rank receives its segment's sums (Gloo, which has no
   * reduce-scatter in libtorch 1.13: all-reduced, the segment read out).
   */
  owner?: readonly number[];
}

interface GroupAccess {
  ready(op: string): number;
  collective(op: string, status: number): void;
}

/**
 * Sums gradients over the ranks while the backward pass runs, as PyTorch's DDP does
 * (ffi/dist.cpp's reducer: post hooks on the parameters' gradient accumulators, run on
 * the autograd engine's threads, so the work is all in C++).
 *
 * The parameters are cut into buckets of about `bucketBytes` in reverse order (the order
 * a backward produces their gradients; `buckets` lists them). In a synced backward, a
 * bucket whose gradients are all accumulated is flattened and its all-reduce (sum) is
 * launched at once, in bucket order on every rank; `finish()` launches what is left (a
 * gradient no backward produced counts as zeros), waits, and writes the sums back:
 *
 *   reducer.prepare(false); microLoss1.backward();   // accumulate only (DDP's no_sync)
 *   reducer.prepare(true);  microLoss2.backward();   // buckets all-reduce while it runs
 *   reducer.finish();                                 // p.grad = sum over ranks
 *
 * A rank with nothing to backpropagate calls prepare and finish alone: it joins with
 * zeros. Errors (a dead peer, a timeout) come from finish as DistributedErrors and break
 * the group, as any failed collective does. Dispose before the parameters stop requiring
 * gradients; never during a backward.
 */
export class GradientReducer {
  #handle: number;
  readonly #group: GroupAccess;
  /** Parameter indices of each bucket, in the order they are reduced. */
  readonly buckets: readonly (readonly number[])[];

  /** @internal Use ProcessGroup.gradientReducer(). */
  constructor(handle: number, buckets: number[][], group: GroupAccess) {
    this.#handle = handle;
    this.buckets = buckets;
    this.#group = group;
  }

  #live(op: string): number {
    this.#group.ready(op);
    if (this.#handle === 0) throw new TorchError(`${op}: the gradient reducer was disposed`);
    return this.#handle;
  }

  /** Whether the backward passes until the next finish() all-reduce (true: the last micro-batch's) or only accumulate (false). */
  prepare(sync: boolean): void {
    check(S.vt_dist_reducer_prepare(this.#live("gradientReducer.prepare"), sync ? 1 : 0));
  }

  /**
   * Waits for every bucket's sum (launching those the backward did not) and writes it into
   * the parameters' gradients, divided by `divideBy` when given (the trainer divides its
   * losses instead and passes nothing). Then the reducer is ready for the next step.
   */
  finish(opts: { divideBy?: number } = {}): void {
    const op = "gradientReducer.finish";
    const divisor = opts.divideBy ?? 1;
    if (!Number.isFinite(divisor) || divisor === 0) throw new TorchError(`${op}: divideBy must be a finite non-zero number, got ${divisor}`);
    this.#group.collective(op, S.vt_dist_reducer_finish(this.#live(op), divisor));
  }

  get disposed(): boolean {
    return this.#handle === 0;
  }

  /** Unregisters the hooks. */
  dispose(): void {
    if (this.#handle !== 0) S.vt_dist_reducer_free(this.#handle);
    this.#handle = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
