/**
 * The engine's sampling log-probs against the training forward's on CUDA (the CPU test is
 * test/engine/logprob-consistency.test.ts): each fixture (two Qwen2.5-VL, one Qwen3), its
 * text and image prompts sampled together (prefill, then CUDA-graph decode steps with the
 * fused slot-attention kernel), then one padded training forward with gradients over
 * prompt + sampled ids. Skipped without a CUDA build of the shim and a GPU.
 *
 * Tolerances:
 * - bf16: max |diff| < 0.05 and mean |diff| < 0.01 per token. The two paths cannot
 *   round alike: the engine multiplies by packed q/k/v and gate/up weights, rotates and
 *   attends in one decode kernel over a KV cache, and encodes images one at a time; the
 *   training forward runs unpacked GEMMs and differentiable composites over the whole
 *   sequence. Each rounds every activation to bf16 (8 significant bits, a relative step
 *   of 2^-8), so the logits differ by a few bf16 steps of their size, and a log-prob
 *   (log-softmax in f32 of those logits) by about twice that. 0.05 keeps the starting
 *   PPO ratio within exp(±0.05) = [0.95, 1.05], well inside the usual clip of 0.2, and
 *   the mean bound catches a systematic shift that a max bound alone would let through.
 * - f32: max |diff| < 1e-3, looser than the CPU's 1e-4 because cuBLAS and cuDNN pick
 *   kernels (and summation orders) by shape, and the engine's shapes (one token per
 *   decode step) are not the training forward's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import * as torch from "../../src/torch/index.ts";
import { F } from "../../src/torch/index.ts";
import { compareLogprobs, fixtureMessages, textMessages } from "../engine/logprob-check.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";

function cudaAvailable(): boolean {
  try {
    return torch.torchInfo().cudaDevices > 0;
  } catch {
    return false;
  }
}

const PARITY_DIR = join(import.meta.dir, "..", "fixtures", "qwen2_5_vl_parity");
const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");

/**
 * Half-precision runs use math attention, as test/gpu/engine.test.ts does: with the
 * libtorch 2.11 build the fused SDPA kernels crash the process on bf16 inputs. The
 * vision tower calls SDPA too, so libtorch's fused backends are switched off for the run
 * as well (and restored after).
 */
const HALF_ATTENTION_IS_MATH = true;

const RUNS: { dtype: "bf16" | "f32"; maxAbs: number; meanAbs: number }[] = [
  { dtype: "bf16", maxAbs: 0.05, meanAbs: 0.01 },
  { dtype: "f32", maxAbs: 1e-3, meanAbs: 1e-4 },
];

for (const { dtype, maxAbs, meanAbs } of RUNS) {
  for (const [fixture, dir, cases] of [
    ["tiny", FIXTURE_DIR, ["text", "one_image", "two_images"]],
    ["parity (perturbed weights)", PARITY_DIR, ["two_images", "text_first", "wide224x168"]],
    ["Qwen3 tiny (text family)", QWEN3_DIR, ["single", "multi_turn", "system"]],
  ] as const) {
    describe.skipIf(!cudaAvailable())(`engine sampling log-probs = training forward log-probs (${fixture} fixture, CUDA, ${dtype})`, () => {
      const mathAttention = dtype !== "f32" && HALF_ATTENTION_IS_MATH;
      let loaded: LoadedEngine;
      let backends: F.SdpBackends | undefined;
      beforeAll(() => {
        if (mathAttention) backends = F.sdpBackends({ flash: false, memEfficient: false, cudnn: false, math: true });
        loaded = loadEngine(dir, { device: "cuda", dtype, max_seq_len: 512, kv_cache_gib: 0.1, max_slots: 8, attention: mathAttention ? "math" : "fused" });
      });
      afterAll(async () => {
        await loaded.close();
        if (backends) F.sdpBackends(backends);
      });

      test("text and image prompts, batched, at temperature 1", async () => {
        const messages = [...cases.map((name) => fixtureMessages(dir, name)), textMessages("Count to five."), textMessages("Hi")];
        const r = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 24, mathAttention });
        console.log(`${fixture} ${dtype}: max |diff| ${r.maxAbsDiff.toExponential(2)}, mean ${r.meanAbsDiff.toExponential(2)}`);
        expect(r.results.reduce((n, g) => n + g.tokenIds.length, 0)).toBeGreaterThan(messages.length);
        expect(r.maxAbsDiff).toBeLessThan(maxAbs);
        expect(r.meanAbsDiff).toBeLessThan(meanAbs);
        expect(r.gradNorm).toBeGreaterThan(0);
      }, 120_000);
    });
  }
}
