/**
 * LoRA on the shared decoder (src/models/lora.ts), on both tiny fixtures, CPU f32:
 * a fresh adapter is a no-op (B = 0: logits bit-equal to the base); with B drawn, the
 * adapter's logits equal a model whose weights are W + (alpha / r) B A (an independent
 * composition, through the merge `vagen export --merge` writes), `without` gives the base
 * back bit for bit, and the engine's sampling log-probs equal the training forward's.
 * A and B's gradients are checked against the hand-derived formulas on a tiny shape.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadEngine } from "../../src/engine/load.ts";
import { LoraAdapter, attachAdapter, loadModelFamily, type ModelFamily } from "../../src/models/index.ts";
import * as torch from "../../src/torch/index.ts";
import type { Tensor } from "../../src/torch/index.ts";
import { compareLogprobs, textMessages } from "../engine/logprob-check.ts";
import { FIXTURE_DIR } from "./fixture.ts";

const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
const IDS = [
  [5, 17, 42, 8, 99, 3, 64],
  [7, 7, 21, 130, 2, 11, 40],
];
const SETTINGS = { rank: 4, alpha: 8, targets: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] as const, seed: 3 };

function logits(family: ModelFamily): Float32Array {
  return torch.noGrad(() => torch.tidy(() => family.logits(family.forwardForTraining({ inputIds: IDS, images: IDS.map(() => []) })).toFloat32Array()));
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Draws every B (a fresh adapter's are zero) from a seeded generator. */
function drawB(adapter: LoraAdapter, scale = 0.05): void {
  const gen = new torch.Generator({ seed: 11, device: "cpu" });
  for (const [name, t] of adapter.weights) {
    if (!name.endsWith("lora_B.weight")) continue;
    torch.noGrad(() => torch.tidy(() => t.copy_(torch.randn(t.shape, { dtype: "f32", generator: gen }).mul(scale))));
  }
  gen.dispose();
}

for (const [fixture, dir] of [
  ["Qwen2.5-VL tiny", FIXTURE_DIR],
  ["Qwen3 tiny", QWEN3_DIR],
] as const) {
  describe(`LoRA on the ${fixture} fixture (CPU, f32)`, () => {
    let family: ModelFamily;
    let adapter: LoraAdapter;
    let base: Float32Array;
    let ledger: { leaked(): number };
    beforeAll(() => {
      torch.loadTorch();
      ledger = torch.tensorLedger();
      family = loadModelFamily(dir, { device: "cpu", dtype: "f32" });
      base = logits(family);
      adapter = LoraAdapter.create(family.weights, family.spec.numLayers, { ...SETTINGS, targets: [...SETTINGS.targets] }, { device: "cpu", dtype: "f32" });
      attachAdapter(family.weights, adapter);
    });
    afterAll(() => {
      attachAdapter(family.weights, undefined);
      adapter.dispose();
      family.dispose();
      expect(ledger.leaked()).toBe(0);
    });

    test("the adapter's shapes and names are PEFT's; A is seeded, B zero", () => {
      const q = family.weights.get("model.layers.0.self_attn.q_proj.weight")!;
      const a = adapter.weights.get("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")!;
      const b = adapter.weights.get("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")!;
      expect(a.shape).toEqual([4, q.shape[1]!]);
      expect(b.shape).toEqual([q.shape[0]!, 4]);
      expect(adapter.weights.has("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight")).toBe(true);
      expect(adapter.weights.size).toBe(2 * 7 * family.spec.numLayers);
      expect(adapter.scale).toBe(2);
      const bound = 1 / Math.sqrt(q.shape[1]!);
      const values = a.toFloat32Array();
      expect(Math.max(...values.map(Math.abs))).toBeLessThanOrEqual(bound);
      expect(Math.max(...values.map(Math.abs))).toBeGreaterThan(bound / 2);
      expect(torch.tidy(() => b.abs().max().item())).toBe(0);
      // the same seed draws the same A
      const again = LoraAdapter.create(family.weights, family.spec.numLayers, { ...SETTINGS, targets: [...SETTINGS.targets] }, { device: "cpu", dtype: "f32" });
      expect(Array.from(again.weights.get("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")!.toFloat32Array())).toEqual(Array.from(values));
      again.dispose();
    });

    test("a fresh adapter is a no-op: logits bit-equal to the base's", () => {
      expect(maxAbsDiff(logits(family), base)).toBe(0);
    });

    test("with B drawn, logits equal the merged weights' (W + alpha/r B A); without() is the base bit for bit", () => {
      drawB(adapter);
      const adapted = logits(family);
      expect(maxAbsDiff(adapted, base)).toBeGreaterThan(1e-3);
      expect(maxAbsDiff(adapter.without(() => logits(family)), base)).toBe(0);
      expect(adapter.enabled).toBe(true);
      // An independent copy of the model with the adapter merged into its weights.
      const other = loadModelFamily(dir, { device: "cpu", dtype: "f32" });
      const merged = adapter.merged(other.weights);
      expect(merged.size).toBe(7 * family.spec.numLayers);
      for (const [name, t] of merged) torch.noGrad(() => other.weights.get(name)!.copy_(t));
      expect(maxAbsDiff(logits(other), adapted)).toBeLessThan(1e-5);
      for (const t of merged.values()) t.dispose();
      other.dispose();
    });

    test("engine sampling log-probs equal the training forward's with the adapter on", async () => {
      const loaded = loadEngine(dir, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.02, max_slots: 4 });
      const own = LoraAdapter.create(loaded.model.weights, loaded.model.spec.numLayers, { ...SETTINGS, targets: [...SETTINGS.targets] }, { device: "cpu", dtype: "f32" });
      drawB(own, 0.2);
      attachAdapter(loaded.model.weights, own);
      try {
        const messages = [textMessages("Count to five."), textMessages("Hi")];
        const withAdapter = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 8 });
        expect(withAdapter.maxAbsDiff).toBeLessThan(1e-4);
        expect(withAdapter.gradNorm).toBeGreaterThan(0);
        // The engine did sample from base + adapter: with the adapter off (same seeds) the
        // first token's log-prob is another, and engine and training agree on the base too.
        attachAdapter(loaded.model.weights, undefined);
        const baseRun = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 8 });
        expect(baseRun.maxAbsDiff).toBeLessThan(1e-4);
        expect(Math.abs(baseRun.results[0]!.logprobs[0]! - withAdapter.results[0]!.logprobs[0]!)).toBeGreaterThan(1e-3);
      } finally {
        attachAdapter(loaded.model.weights, undefined);
        own.dispose();
        await loaded.close();
      }
    }, 60_000);
  });
}

describe("LoRA gradients (tiny shape, against the hand-derived formulas)", () => {
  test("y = W x + s B A x: dL/dB = s G (A x)^T, dL/dA = s B^T G x^T, W untouched", () => {
    // x: 2 rows of in = 3; W: out = 2; r = 2; s = alpha / r = 3 / 2; L = sum(G * y).
    const X = [
      [1, -2, 0.5],
      [0.25, 1, -1],
    ];
    const Av = [
      [0.5, -1, 2],
      [1, 0.5, -0.5],
    ];
    const Bv = [
      [1, -2],
      [0.5, 3],
    ];
    const G = [
      [1, 2],
      [-1, 0.5],
    ];
    const s = 1.5;
    const base = new Map<string, Tensor>([["model.layers.0.self_attn.q_proj.weight", torch.tensor([1, 0, 2, -1, 1, 0], [2, 3])]]);
    const adapter = LoraAdapter.create(base, 1, { rank: 2, alpha: 3, targets: ["q_proj"], seed: 0 }, { device: "cpu", dtype: "f32" });
    const a = adapter.weights.get("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")!;
    const b = adapter.weights.get("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")!;
    torch.noGrad(() => torch.tidy(() => (a.copy_(torch.tensor(Av.flat(), [2, 3])), b.copy_(torch.tensor(Bv.flat(), [2, 2])))));
    a.requiresGrad_(true);
    b.requiresGrad_(true);
    const w = base.get("model.layers.0.self_attn.q_proj.weight")!;
    torch.enableGrad(() =>
      torch.tidy(() => {
        const x = torch.tensor(X.flat(), [2, 3]);
        const y = adapter.apply(0, "q_proj", x, torch.F.linear(x, w));
        y.mul(torch.tensor(G.flat(), [2, 2])).sum().backward();
        // untargeted modules pass y through
        expect(adapter.apply(0, "v_proj", x, x)).toBe(x);
      }),
    );
    // Ax per row: u[n][k] = sum_i A[k][i] X[n][i]
    const u = X.map((x) => Av.map((row) => row.reduce((acc, v, i) => acc + v * x[i]!, 0)));
    const dB = Bv.map((_, o) => Bv[0]!.map((_, k) => s * G.reduce((acc, g, n) => acc + g[o]! * u[n]![k]!, 0)));
    // (B^T G)[n][k] = sum_o B[o][k] G[n][o]
    const btg = G.map((g) => [0, 1].map((k) => Bv.reduce((acc, row, o) => acc + row[k]! * g[o]!, 0)));
    const dA = Av.map((row, k) => row.map((_, i) => s * X.reduce((acc, x, n) => acc + btg[n]![k]! * x[i]!, 0)));
    const close = (t: Tensor, want: number[][]) => Array.from(t.toFloat32Array()).forEach((v, j) => expect(v).toBeCloseTo(want.flat()[j]!, 5));
    close(b.grad!, dB);
    close(a.grad!, dA);
    // the frozen base weight has no gradient
    expect(w.grad).toBeUndefined();
    a.grad = undefined;
    b.grad = undefined;
    adapter.dispose();
    w.dispose();
  });
});
