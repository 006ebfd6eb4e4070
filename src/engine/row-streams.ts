/**
 * Counter-based random streams for seeded rows: the uniforms a row draws for its t-th
 * token are a hash of (seed, t, vocab index), computed for every row of a batch in one
 * chain of element-wise kernels.
 *
 * A generator object per seeded request meant one `rand` and one copy per row and decode
 * step, 2N kernel launches and FFI calls for N rows: at 256 rows a step that was most of
 * the host's decode time on a GPU, which waited. A hash needs no state, so the rows'
 * draws stay independent of what else shares the batch, as the seeds promise.
 *
 * The hash: a row key `rowStreamKey(seed, t)` (host, 32 bits), then for vocab index v
 * `fmix32((key + v * 0x9E3779B9) mod 2^32)`, a bijection of a Weyl sequence (Wellons'
 * "lowbias32" finaliser), its top 24 bits as a uniform in (0, 1): (x + 0.5) / 2^24.
 * On the device it is computed in int64 with every value below 2^49, so no operation
 * overflows, with xor as (a | b) - (a & b) and shifts as floor division. Keys are 32
 * bits: two rows of one decode step share a stream with probability 2^-32 a pair.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";

const TWO_32 = 2 ** 32;
const WEYL = 0x9e3779b9;
const M1 = 0x7feb352d;
const M2 = 0x846ca68b;

/** lowbias32: a 32-bit bijection with good avalanche. */
export function fmix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, M1);
  x ^= x >>> 15;
  x = Math.imul(x, M2);
  x ^= x >>> 16;
  return x >>> 0;
}

/** The 32-bit key of draw `draw` (0, 1, ...) of a row seeded with `seed` (any integer below 2^53 in size). */
export function rowStreamKey(seed: number, draw: number): number {
  const lo = seed >>> 0;
  const hi = Math.floor(seed / TWO_32) >>> 0;
  return fmix32((fmix32(lo ^ fmix32(hi ^ 0x5bd1e995)) + fmix32(draw >>> 0)) >>> 0);
}

/** The uniform a key gives vocab index v, on the host: the reference the device path equals. */
export function streamUniform(key: number, v: number): number {
  const x = fmix32((key + Math.imul(v, WEYL)) >>> 0);
  return ((x >>> 8) + 0.5) / 2 ** 24;
}

// ---- the device path: the same integers, int64 below 2^49 -------------------------------

const xor = (a: Tensor, b: Tensor): Tensor => a.bitwiseOr(b).sub(a.bitwiseAnd(b));

/** x * c mod 2^32 for x < 2^32, c < 2^32: split c in 16-bit halves so no product reaches 2^49. */
function mulMod32(x: Tensor, c: number): Tensor {
  const hi = Math.floor(c / 65536);
  const lo = c % 65536;
  return x.mul(lo).add(x.mul(hi).remainder(65536).mul(65536)).remainder(TWO_32);
}

function xorShift(x: Tensor, k: number): Tensor {
  return xor(x, x.floorDivide(2 ** k));
}

function fmix32Tensor(x: Tensor): Tensor {
  let h = xorShift(x, 16);
  h = mulMod32(h, M1);
  h = xorShift(h, 15);
  h = mulMod32(h, M2);
  return xorShift(h, 16);
}

/**
 * (N, V) float32 uniforms in (0, 1): row i from `keys[i]` (`rowStreamKey`), exactly
 * `streamUniform(keys[i], v)` at column v. Call inside a tidy scope. `streams` keeps the
 * per-vocabulary part from one call to the next (an engine's runner owns one); without it
 * that part is made again.
 */
export function streamUniforms(keys: readonly number[], V: number, device: torch.Device, streams?: RowStreams): Tensor {
  const N = keys.length;
  const k = torch.tensor(Float64Array.from(keys), [N, 1], { dtype: "i64", device });
  const weyl = streams?.weylRow(V, device) ?? makeWeylRow(V, device);
  const x = fmix32Tensor(k.add(weyl).remainder(TWO_32));
  return x.floorDivide(256).float().add(0.5).mul(2 ** -24);
}

/** (1, V) int64 (v * WEYL) mod 2^32; v * WEYL fits int64 for any vocabulary below 2^31. */
function makeWeylRow(V: number, device: torch.Device): Tensor {
  return torch.arange(V, undefined, 1, { dtype: "i64", device }).mul(WEYL).remainder(TWO_32).view(1, V);
}

/** What every decode step's streams share, made once: the (1, V) Weyl row per vocabulary and device. */
export class RowStreams {
  private readonly rows = new Map<string, Tensor>();

  weylRow(V: number, device: torch.Device): Tensor {
    const key = `${V}@${device}`;
    let row = this.rows.get(key);
    if (row === undefined) {
      row = torch.keep(torch.tidy(() => makeWeylRow(V, device)));
      this.rows.set(key, row);
    }
    return row;
  }

  dispose(): void {
    for (const row of this.rows.values()) row.dispose();
    this.rows.clear();
  }
}
