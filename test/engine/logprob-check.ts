/**
 * Sampling log-probs against the training forward: sample replies with the engine, then
 * run the family's differentiable training forward over prompt + sampled ids (laid out
 * as the trainer lays out rows: prompts left-padded to one width, replies right-padded)
 * and recompute each sampled token's log-prob. Where the two agree, a PPO ratio starts
 * at 1. Shared by the CPU test (test/engine) and the CUDA test (test/gpu).
 */
import type { ChatMessage } from "../../src/core/chat.ts";
import type { LoadedEngine } from "../../src/engine/load.ts";
import type { GenerationResult, Prompt } from "../../src/engine/types.ts";
import { neverSampledIndex, withoutNeverSampled } from "../../src/torch/logit-mask.ts";
import * as torch from "../../src/torch/index.ts";
import { fixtureMessages } from "../models/fixture.ts";

export { fixtureMessages };

export const textMessages = (text: string): ChatMessage[] => [{ role: "user", content: [{ type: "text", text }] }];

export interface LogprobComparison {
  /** Per prompt: the engine's sampled ids and log-probs. */
  results: GenerationResult[];
  /** Per prompt: the training forward's log-prob of each sampled id. */
  recomputed: number[][];
  /** max |engine - training| over every sampled token. */
  maxAbsDiff: number;
  /** mean |engine - training| over every sampled token. */
  meanAbsDiff: number;
  /** Sum of |gradient| of the first layer's q projection after backward of the recomputed log-probs. */
  gradNorm: number;
}

export interface CompareOptions {
  temperature: number;
  maxNewTokens: number;
  /** Math attention in the training forward (as the engine's `attention: math`). */
  mathAttention?: boolean;
  /** Prompt i samples with seed `seedBase + i` (default 100). */
  seedBase?: number;
}

/**
 * Samples one reply per prompt (all in flight together, so the engine batches them),
 * then recomputes their log-probs in one padded training forward with gradients.
 */
export async function compareLogprobs(loaded: LoadedEngine, messages: readonly ChatMessage[][], opts: CompareOptions): Promise<LogprobComparison> {
  const { engine, model } = loaded;
  const prompts: Prompt[] = messages.map((m) => model.buildPrompt(m));
  // A sampled vision token (an image placeholder without an image) is a reply the
  // rollout drops as unusable and the training forward refuses: such a batch is drawn
  // again from the next seeds, as a rollout would go on without it.
  const vision = new Set(model.visionTokenIds);
  let results: GenerationResult[] = [];
  for (let attempt = 0, base = opts.seedBase ?? 100; attempt < 8; attempt++, base += 1000) {
    results = await Promise.all(
      prompts.map((prompt, i) => engine.generate({ prompt, sampling: { temperature: opts.temperature, maxNewTokens: opts.maxNewTokens, seed: base + i } })),
    );
    if (!results.some((r) => r.tokenIds.some((id) => vision.has(id)))) break;
  }

  // The trainer's layout: prompt left-padded to P, reply right-padded to R.
  const P = Math.max(...prompts.map((p) => p.tokenIds.length));
  const R = Math.max(...results.map((r) => r.tokenIds.length));
  const pad = model.eosTokenIds[0] ?? 0;
  const inputIds = prompts.map((p, b) => [
    ...new Array<number>(P - p.tokenIds.length).fill(pad),
    ...p.tokenIds,
    ...results[b]!.tokenIds,
    ...new Array<number>(R - results[b]!.tokenIds.length).fill(pad),
  ]);
  const attentionMask = prompts.map((p, b) => [
    ...new Array<number>(P - p.tokenIds.length).fill(0),
    ...new Array<number>(p.tokenIds.length + results[b]!.tokenIds.length).fill(1),
    ...new Array<number>(R - results[b]!.tokenIds.length).fill(0),
  ]);
  const targets = torch.tensor(
    Float64Array.from(results.flatMap((r) => [...r.tokenIds, ...new Array<number>(R - r.tokenIds.length).fill(pad)])),
    [prompts.length, R, 1],
    { dtype: "i64", device: model.device },
  );

  // The training path: gradients on, so the decoder runs the unpacked projections a
  // trainer differentiates through, and a weight marked requiresGrad gets a gradient.
  const probe = model.weights.get("model.layers.0.self_attn.q_proj.weight")!;
  probe.requiresGrad_(true);
  try {
    const { logprobs, gradNorm } = torch.enableGrad(() =>
      torch.tidy(() => {
        const hidden = model.forwardForTraining({ inputIds, attentionMask, images: prompts.map((p) => p.images.map((i) => i.image)) }, { mathAttention: opts.mathAttention });
        // Column P - 1 + j predicts reply token j.
        // The trainer's distribution: the never-sampled (vision) ids out, as in the engine.
        const raw = model.logits(hidden.narrow(1, P - 1, R)).float();
        const never = neverSampledIndex(model.visionTokenIds, raw.shape[2]!, model.device);
        const logits = never ? withoutNeverSampled(raw, never) : raw;
        const lp = logits.div(opts.temperature).logSoftmax(-1).gather(2, targets).squeeze(2); // (B, R)
        const mask = torch.tensor(Float32Array.from(results.flatMap((r) => Array.from({ length: R }, (_, j) => (j < r.tokenIds.length ? 1 : 0)))), [prompts.length, R], {
          device: model.device,
        });
        lp.mul(mask).sum().backward();
        return { logprobs: lp.detach().toFloat32Array(), gradNorm: probe.grad!.abs().sum().item() };
      }),
    );
    const recomputed = results.map((r, b) => Array.from(logprobs.subarray(b * R, b * R + r.tokenIds.length)));
    const diffs = results.flatMap((r, b) => r.logprobs.map((lp, j) => Math.abs(lp - recomputed[b]![j]!)));
    return {
      results,
      recomputed,
      maxAbsDiff: Math.max(...diffs),
      meanAbsDiff: diffs.reduce((a, d) => a + d, 0) / diffs.length,
      gradNorm,
    };
  } finally {
    targets.dispose();
    probe.grad?.dispose();
    probe.grad = undefined;
    probe.requiresGrad_(false);
  }
}
