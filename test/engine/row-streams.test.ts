import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { fmix32, RowStreams, rowStreamKey, streamUniform, streamUniforms } from "../../src/engine/row-streams.ts";
import { sampleRows, type RowSampling } from "../../src/engine/sampler.ts";

describe("row streams", () => {
  test("the hash's values, computed independently with Python integers", () => {
    // def fmix(x): x ^= x >> 16; x = x * 0x7feb352d & M; x ^= x >> 15; x = x * 0x846ca68b & M; return x ^ x >> 16
    expect([fmix32(0), fmix32(1), fmix32(0xdeadbeef)]).toEqual([0, 1753845952, 3861431939]);
    expect([rowStreamKey(42, 0), rowStreamKey(42, 1), rowStreamKey(2 ** 40 + 7, 3)]).toEqual([4029235012, 627114646, 1644915715]);
    const key = rowStreamKey(42, 0);
    expect([0, 1, 546].map((v) => streamUniform(key, v))).toEqual([0.2955087125301361, 0.06943240761756897, 0.823991984128952]);
  });

  test("the device path equals the host's, bit for bit, at the real vocabulary's size", () => {
    const V = 151_936;
    const keys = [rowStreamKey(0, 0), rowStreamKey(0, 1), rowStreamKey(7, 0), rowStreamKey(-3, 12), 0, 2 ** 32 - 1];
    const got = torch.tidy(() => streamUniforms(keys, V, "cpu").toFloat32Array());
    // The same through a RowStreams that keeps its Weyl row, twice.
    const streams = new RowStreams();
    for (let i = 0; i < 2; i++) expect(torch.tidy(() => streamUniforms(keys, V, "cpu", streams).toFloat32Array())).toEqual(got);
    streams.dispose();
    for (const [i, key] of keys.entries()) {
      for (const v of [0, 1, 2, 546, 547, 65_535, 65_536, 151_935]) expect(got[i * V + v]).toBe(Math.fround(streamUniform(key, v)));
      let mismatches = 0;
      for (let v = 0; v < V; v++) if (got[i * V + v] !== Math.fround(streamUniform(key, v))) mismatches++;
      expect(mismatches).toBe(0);
    }
  });

  test("uniform in (0, 1): flat over 16 bins, rows and draws uncorrelated", () => {
    const V = 65_536;
    const keys = [rowStreamKey(1, 0), rowStreamKey(1, 1), rowStreamKey(2, 0)];
    const u = torch.tidy(() => streamUniforms(keys, V, "cpu").toFloat32Array());
    for (let r = 0; r < keys.length; r++) {
      const row = u.subarray(r * V, (r + 1) * V);
      const bins = new Array<number>(16).fill(0);
      for (const x of row) {
        expect(x > 0 && x < 1).toBe(true);
        bins[Math.floor(x * 16)]!++;
      }
      // Chi-square with 15 degrees of freedom: above 37.7 one time in a thousand.
      const expected = V / 16;
      const chi2 = bins.reduce((s, b) => s + (b - expected) ** 2 / expected, 0);
      expect(chi2).toBeLessThan(37.7);
    }
    const corr = (a: Float32Array, b: Float32Array) => {
      let sab = 0, sa = 0, sb = 0, saa = 0, sbb = 0;
      for (let i = 0; i < a.length; i++) { sab += a[i]! * b[i]!; sa += a[i]!; sb += b[i]!; saa += a[i]! ** 2; sbb += b[i]! ** 2; }
      const n = a.length;
      return (sab / n - (sa / n) * (sb / n)) / Math.sqrt((saa / n - (sa / n) ** 2) * (sbb / n - (sb / n) ** 2));
    };
    // |r| above 4 / sqrt(n) = 0.016 would be a 4-sigma event for independent rows.
    expect(Math.abs(corr(u.subarray(0, V), u.subarray(V, 2 * V)))).toBeLessThan(0.016);
    expect(Math.abs(corr(u.subarray(0, V), u.subarray(2 * V, 3 * V)))).toBeLessThan(0.016);
  });

  test("seeded rows sample the softmax's frequencies, and a row's token does not depend on its neighbours", () => {
    const probs = [0.5, 0.3, 0.15, 0.05];
    const draws = 4000;
    const counts = [0, 0, 0, 0];
    const shared = new torch.Generator({ seed: 1 });
    torch.tidy(() => {
      const logits = torch.tensor(Float32Array.from({ length: 3 * 4 }, (_, i) => Math.log(probs[i % 4]!)), [3, 4]);
      for (let t = 0; t < draws; t++) {
        const row: RowSampling = { temperature: 1, topK: 0, topP: 1, streamKey: rowStreamKey(5, t) };
        const alone = sampleRows(logits.narrow(0, 0, 1), [row], shared).tokenIds[0]!;
        // The same row between an unseeded and a differently seeded one.
        const inBatch = sampleRows(logits, [{ ...row, streamKey: undefined }, row, { ...row, streamKey: rowStreamKey(6, t) }], shared).tokenIds[1]!;
        expect(inBatch).toBe(alone);
        counts[alone]!++;
      }
    });
    shared.dispose();
    // Each frequency within 4.5 standard errors of its probability.
    for (const [k, p] of probs.entries()) expect(Math.abs(counts[k]! / draws - p)).toBeLessThan(4.5 * Math.sqrt((p * (1 - p)) / draws));
  });
});
