/**
 * Random number generation: seeded generators and the global seed.
 */
import { OUT, OUT_PTR, S, check, loadTorch } from "./native.ts";
import { parseDevice, type Device } from "./dtype.ts";
import type { GeneratorHandle } from "./generator-handle.ts";
import { Tensor } from "./tensor.ts";

const registry = new FinalizationRegistry<number>((h) => S.vt_generator_free(h));

/**
 * A seeded random stream (PyTorch's torch.Generator). Pass it to rand/randn/randint,
 * multinomial, uniform_ and normal_ for reproducible draws independent of the global seed.
 */
export class Generator implements GeneratorHandle {
  /** @internal */ _h: number;
  readonly device: Device;

  constructor(opts: { seed?: number; device?: Device } = {}) {
    loadTorch();
    this.device = opts.device ?? "cpu";
    const d = parseDevice(this.device);
    check(S.vt_generator_new(d.type, d.index, opts.seed ?? 0, OUT_PTR));
    this._h = OUT[0]!;
    registry.register(this, this._h, this);
  }

  manualSeed(seed: number): this {
    check(S.vt_generator_seed(this._h, seed));
    return this;
  }

  /** The full generator state (a uint8 CPU tensor), for setState(). */
  getState(): Tensor {
    check(S.vt_generator_get_state(this._h, OUT_PTR));
    return new Tensor(OUT[0]!);
  }

  setState(state: Tensor): this {
    check(S.vt_generator_set_state(this._h, state._h));
    return this;
  }

  dispose(): void {
    if (this._h === 0) return;
    registry.unregister(this);
    S.vt_generator_free(this._h);
    this._h = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Seeds the default generators of the CPU and of every CUDA device. */
export function manualSeed(seed: number): void {
  loadTorch();
  check(S.vt_manual_seed(seed));
}

/** State of a device's default generator (for getRngState / setRngState round trips). */
export function getRngState(device: Device = "cpu"): Tensor {
  loadTorch();
  const d = parseDevice(device);
  check(S.vt_default_rng_state(d.type, d.index < 0 ? 0 : d.index, OUT_PTR));
  return new Tensor(OUT[0]!);
}

export function setRngState(state: Tensor, device: Device = "cpu"): void {
  const d = parseDevice(device);
  check(S.vt_set_default_rng_state(d.type, d.index < 0 ? 0 : d.index, state._h));
}
