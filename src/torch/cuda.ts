/**
 * CUDA: devices, synchronisation, caching-allocator statistics, streams, events (timing)
 * and CUDA graphs. On a machine or build without CUDA, isAvailable() is false,
 * deviceCount() is 0 and everything else throws a TorchError saying so.
 */
import { OUT, OUT_PTR, S, check, loadTorch } from "./native.ts";
import { parseDevice, type Device } from "./dtype.ts";

export function isAvailable(): boolean {
  return deviceCount() > 0;
}

export function deviceCount(): number {
  loadTorch();
  return S.vt_cuda_device_count();
}

export interface DeviceProperties {
  name: string;
  totalMemory: number;
  major: number;
  minor: number;
  multiProcessorCount: number;
}

export function getDeviceProperties(device = 0): DeviceProperties {
  loadTorch();
  const name = new Uint8Array(256);
  check(S.vt_cuda_properties(device, OUT_PTR, name, name.length));
  const end = name.indexOf(0);
  return {
    name: new TextDecoder().decode(name.subarray(0, end < 0 ? name.length : end)),
    totalMemory: OUT[0]!,
    major: OUT[1]!,
    minor: OUT[2]!,
    multiProcessorCount: OUT[3]!,
  };
}

function index(device: Device | number | undefined): number {
  if (device === undefined) return -1;
  if (typeof device === "number") return device;
  return parseDevice(device).index;
}

/** Waits for all queued work on a device (default: the current one). */
export function synchronize(device?: Device | number): void {
  loadTorch();
  check(S.vt_cuda_synchronize(index(device)));
}

export interface MemoryStats {
  /** Bytes held by live tensors. */
  allocated: number;
  /** Bytes reserved by the caching allocator (allocated + cached). */
  reserved: number;
  peakAllocated: number;
  peakReserved: number;
  allocRetries: number;
  ooms: number;
}

export function memoryStats(device: Device | number = 0): MemoryStats {
  loadTorch();
  check(S.vt_cuda_memory_stats(Math.max(0, index(device)), OUT_PTR));
  return {
    allocated: OUT[0]!,
    reserved: OUT[1]!,
    peakAllocated: OUT[2]!,
    peakReserved: OUT[3]!,
    allocRetries: OUT[4]!,
    ooms: OUT[5]!,
  };
}

export function memoryAllocated(device: Device | number = 0): number {
  return memoryStats(device).allocated;
}

export function resetPeakMemoryStats(device: Device | number = 0): void {
  loadTorch();
  check(S.vt_cuda_reset_peak(Math.max(0, index(device))));
}

/** Returns cached, unused blocks to the driver. */
export function emptyCache(): void {
  loadTorch();
  check(S.vt_cuda_empty_cache());
}

/** Seeds every CUDA device's default generator (and the CPU's). */
export function manualSeedAll(seed: number): void {
  loadTorch();
  check(S.vt_cuda_manual_seed_all(seed));
}

export interface CudnnFlags {
  enabled: boolean;
  /** Let cuDNN time its algorithms per shape and keep the fastest. */
  benchmark: boolean;
  deterministic: boolean;
}

/**
 * Reads, and with `set` changes, libtorch's cuDNN switches (PyTorch's
 * torch.backends.cudnn). With cuDNN off, convolutions use libtorch's own kernels.
 */
export function cudnn(set: Partial<CudnnFlags> = {}): CudnnFlags {
  loadTorch();
  const flag = (v: boolean | undefined) => (v === undefined ? -1 : v ? 1 : 0);
  check(S.vt_cudnn_flags(flag(set.enabled), flag(set.benchmark), flag(set.deterministic), OUT_PTR));
  return { enabled: OUT[0] === 1, benchmark: OUT[1] === 1, deterministic: OUT[2] === 1 };
}

/**
 * Turns the CUDA profiler's collection on or off, so a profiler started with collection
 * off (`ncu --profile-from-start off`) sees only the region between the two calls.
 */
export function profiler(collect: boolean): void {
  loadTorch();
  check(S.vt_cuda_profiler(collect ? 1 : 0));
}

/** A CUDA stream. `Stream.current()` is the stream ops are queued on now. */
export class Stream {
  /** @internal */ _h: number;

  private constructor(handle: number) {
    this._h = handle;
  }

  /** A stream from libtorch's pool on `device`. */
  static create(device: Device | number = 0, opts: { highPriority?: boolean } = {}): Stream {
    loadTorch();
    check(S.vt_cuda_stream_new(Math.max(0, index(device)), opts.highPriority ? 1 : 0, OUT_PTR));
    return new Stream(OUT[0]!);
  }

  static current(device: Device | number = 0): Stream {
    loadTorch();
    check(S.vt_cuda_stream_current(Math.max(0, index(device)), OUT_PTR));
    return new Stream(OUT[0]!);
  }

  synchronize(): void {
    check(S.vt_cuda_stream_synchronize(this._h));
  }

  /** Runs fn with this stream current, then restores the previous one. */
  run<T>(fn: () => T): T {
    const previous = Stream.current();
    check(S.vt_cuda_stream_set_current(this._h));
    try {
      return fn();
    } finally {
      check(S.vt_cuda_stream_set_current(previous._h));
      previous.dispose();
    }
  }

  dispose(): void {
    if (this._h === 0) return;
    S.vt_cuda_stream_free(this._h);
    this._h = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** A CUDA event; with timing enabled, elapsedTime() measures GPU time between two. */
export class Event {
  /** @internal */ _h: number;

  constructor(opts: { enableTiming?: boolean } = {}) {
    loadTorch();
    check(S.vt_cuda_event_new(opts.enableTiming ? 1 : 0, OUT_PTR));
    this._h = OUT[0]!;
  }

  /** Records on `stream` (default: the current stream). */
  record(stream?: Stream): void {
    check(S.vt_cuda_event_record(this._h, stream ? stream._h : 0));
  }

  synchronize(): void {
    check(S.vt_cuda_event_synchronize(this._h));
  }

  query(): boolean {
    check(S.vt_cuda_event_query(this._h, OUT_PTR));
    return OUT[0] === 1;
  }

  /** Milliseconds from this event to `end` (both recorded; end is waited for). */
  elapsedTime(end: Event): number {
    end.synchronize();
    check(S.vt_cuda_event_elapsed(this._h, end._h, OUT_PTR));
    return OUT[0]!;
  }

  dispose(): void {
    if (this._h === 0) return;
    S.vt_cuda_event_free(this._h);
    this._h = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * A captured CUDA graph: record a fixed-shape sequence of kernels once, replay it with a
 * single call. Inputs and outputs are static tensors: write new inputs into them with
 * copy_() before replay(), read outputs after.
 *
 *   const g = new cuda.CUDAGraph();
 *   const out = g.capture(() => torch.keep(model(staticInput)));
 *   staticInput.copy_(next); g.replay(); // out now holds the result
 *
 * Run the work once before capturing (warm-up) so lazy initialisation happens outside.
 */
export class CUDAGraph {
  /** @internal */ _h: number;

  constructor() {
    loadTorch();
    check(S.vt_cuda_graph_new(OUT_PTR));
    this._h = OUT[0]!;
  }

  /** Captures the kernels fn launches; fn runs on a side stream. Returns fn's result. */
  capture<T>(fn: () => T, opts: { sharePoolWith?: CUDAGraph } = {}): T {
    check(S.vt_cuda_graph_begin(this._h, opts.sharePoolWith ? opts.sharePoolWith._h : 0));
    let result: T;
    try {
      result = fn();
    } catch (err) {
      // End the capture so the stream leaves capture mode; report fn's error.
      S.vt_cuda_graph_end(this._h);
      throw err;
    }
    check(S.vt_cuda_graph_end(this._h));
    return result;
  }

  replay(): void {
    check(S.vt_cuda_graph_replay(this._h));
  }

  dispose(): void {
    if (this._h === 0) return;
    S.vt_cuda_graph_free(this._h);
    this._h = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
