import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectClose, torch, values } from "../helpers.ts";

const { safetensors, F } = torch;
const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "safetensors");

export function safetensorsSuite(device: string): void {
  const withDir = (fn: (dir: string) => void) => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-st-"));
    try {
      fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const disposeAll = (m: Map<string, torch.Tensor>) => {
    for (const t of m.values()) t.dispose();
  };

  describe(`safetensors [${device}]`, () => {
    test("save then load round-trips every dtype, shape and the metadata", () =>
      withDir((dir) => {
        const before = torch.liveTensors();
        torch.tidy(() => {
          const src: Record<string, torch.Tensor> = {
            a: torch.tensor([1.5, -2, 3], [3], { device }),
            b: torch.tensor([1 / 3, 7], [2, 1], { dtype: "bf16", device }),
            c: torch.tensor([0.25], [1, 1, 1], { dtype: "f16", device }),
            d: torch.tensor(new BigInt64Array([-(2n ** 50n), 3n]), [2], { device }),
            e: torch.tensor([true, false], [2], { device }),
            f: torch.arange(6, undefined, undefined, { dtype: "i32", device }).reshape(3, 2).t(), // non-contiguous
            g: torch.zeros([0, 4], { device }),
            h: torch.tensor(new Uint8Array([9, 255]), [2], { device }),
          };
          const path = join(dir, "x.safetensors");
          safetensors.save(path, src, { format: "pt", step: "12" });
          const header = safetensors.readHeader(path);
          expect(header.metadata).toEqual({ format: "pt", step: "12" });
          expect(header.tensors.get("b")).toEqual({ dtype: "bf16", shape: [2, 1], dataOffsets: expect.any(Array) });
          expect(header.dataStart % 8).toBe(0);
          const loaded = safetensors.load(path, { device });
          expect([...loaded.keys()].sort()).toEqual(Object.keys(src).sort());
          for (const [name, t] of Object.entries(src)) {
            const l = loaded.get(name)!;
            expect(l.dtype).toBe(t.dtype);
            expect(l.shape).toEqual(t.shape);
            expect(l.device).toBe(t.device);
            expect(values(l)).toEqual(values(t));
          }
          disposeAll(loaded);
        });
        expect(torch.liveTensors()).toBe(before);
      }));

    test("load converts floating tensors to the requested dtype only, and filters", () =>
      withDir((dir) => {
        torch.tidy(() => {
          const path = join(dir, "m.safetensors");
          safetensors.save(path, { w: torch.tensor([0.1, 0.2], [2]), ids: torch.tensor(new BigInt64Array([5n]), [1]) });
          const m = safetensors.load(path, { dtype: "bf16", device });
          expect(m.get("w")!.dtype).toBe("bf16");
          expect(m.get("ids")!.dtype).toBe("i64");
          disposeAll(m);
          const only = safetensors.load(path, { filter: (n) => n === "ids" });
          expect([...only.keys()]).toEqual(["ids"]);
          disposeAll(only);
        });
      }));

    test("saveSharded writes an index; loadSharded reads it back", () =>
      withDir((dir) => {
        torch.tidy(() => {
          const src: Record<string, torch.Tensor> = {};
          for (let i = 0; i < 5; i++) src[`layers.${i}.weight`] = torch.full([16], i, { device });
          safetensors.saveSharded(dir, src, { maxShardBytes: 100 });
          const index = JSON.parse(readFileSync(join(dir, safetensors.INDEX_FILE), "utf8")) as { weight_map: Record<string, string> };
          expect(new Set(Object.values(index.weight_map)).size).toBe(5);
          const loaded = safetensors.loadSharded(dir, { device });
          expect(loaded.size).toBe(5);
          expect(values(loaded.get("layers.3.weight")!)[0]).toBe(3);
          disposeAll(loaded);
        });
      }));

    test("damaged files give errors that name the file and the problem", () =>
      withDir((dir) => {
        const bad = join(dir, "bad.safetensors");
        writeFileSync(bad, Buffer.from([1, 2, 3]));
        expect(() => safetensors.readHeader(bad)).toThrow(/too short/);
        const junk = Buffer.alloc(16);
        junk.writeBigUInt64LE(2n ** 40n);
        writeFileSync(bad, junk);
        expect(() => safetensors.readHeader(bad)).toThrow(/not plausible/);
        const ok = join(dir, "ok.safetensors");
        safetensors.save(ok, { w: torch.tidy(() => torch.keep(torch.ones([64]))) });
        const full = readFileSync(ok);
        writeFileSync(bad, full.subarray(0, full.length - 8));
        expect(() => safetensors.load(bad)).toThrow(/extends past the end of the file/);
        expect(() => safetensors.load(join(dir, "missing.safetensors"))).toThrow(/does not exist/);
        expect(() => safetensors.loadSharded(dir + "/nothing")).toThrow(/neither/);
      }));

    test("reads files written by the Python reference implementation, bf16 included", () => {
      const expected = JSON.parse(readFileSync(join(FIXTURES, "expected.json"), "utf8")) as Record<string, { shape: number[]; values: number[] }> & { sharded: Record<string, number[]> };
      const m = safetensors.load(join(FIXTURES, "dtypes.safetensors"), { device });
      expect(safetensors.readHeader(join(FIXTURES, "dtypes.safetensors")).metadata.source).toBe("vagen fixtures");
      for (const name of ["f32", "f64", "bf16", "f16", "i64", "i32", "u8", "bool", "empty"]) {
        const t = m.get(name)!;
        expect(t.dtype).toBe(name === "empty" ? "f32" : (name as torch.DType));
        expect(t.shape).toEqual(expected[name]!.shape);
        expect(values(t)).toEqual(expected[name]!.values);
      }
      disposeAll(m);
      const sharded = safetensors.loadSharded(join(FIXTURES, "sharded"), { device });
      expect(sharded.get("model.embed_tokens.weight")!.dtype).toBe("bf16");
      for (const [name, vals] of Object.entries(expected.sharded)) expect(values(sharded.get(name)!)).toEqual(vals);
      disposeAll(sharded);
    });

    test("nn functions match PyTorch's reference outputs", () => {
      const r = safetensors.load(join(FIXTURES, "reference_ops.safetensors"), { device });
      const get = (n: string) => r.get(n)!;
      torch.tidy(() => {
        const close = (a: torch.Tensor, b: torch.Tensor, tol = 1e-5) => expectClose(values(a), values(b), tol, tol);
        close(F.scaledDotProductAttention(get("q"), get("k"), get("v"), { isCausal: true, enableGqa: true }), get("sdpa_causal"));
        close(F.scaledDotProductAttention(get("q"), get("k"), get("v"), { attnMask: get("mask"), enableGqa: true }), get("sdpa_masked"));
        close(F.conv3d(get("conv3d_x"), get("conv3d_w"), undefined, { stride: [2, 2, 2] }), get("conv3d_out"), 1e-4);
        close(F.rmsNorm(get("rms_x"), get("rms_w"), 1e-6), get("rms_out"));
        close(F.crossEntropy(get("ce_logits"), get("ce_target"), { labelSmoothing: 0.1 }).reshape(1), get("ce_out"));
        close(F.layerNorm(get("rms_x"), [8], get("rms_w"), get("rms_w").mul(0.1)), get("layer_norm_out"));
        close(F.gelu(get("rms_x"), "tanh"), get("gelu_tanh_out"));
      });
      disposeAll(r);
    });
  });
}
