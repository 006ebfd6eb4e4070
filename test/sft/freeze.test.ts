/**
 * `train.freeze_vision_tower`: the supervised loop leaves every vision-encoder weight
 * exactly as loaded and trains the rest; without it the vision tower trains too. (The
 * demo's policies need it: trained at the decoder's learning rate, a random vision tower
 * loses what tells board cells apart; docs/demo.md.)
 */
import { afterAll, expect, test } from "bun:test";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import * as torch from "../../src/torch/index.ts";
import { makeProbe, solidImage, train, type Probe } from "../demo/image-probe.ts";

const SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 32, textLayers: 1, textHeads: 2, textKvHeads: 1, textIntermediate: 64, visionHidden: 16, visionDepth: 1, visionHeads: 1, visionIntermediate: 32 };
const probes: Probe[] = [];
afterAll(() => probes.forEach((p) => p.dispose()));

/** Names of the weights a few supervised steps changed, split by whether they are the vision encoder's. */
async function changedAfterTraining(freezeVision: boolean): Promise<{ vision: string[]; language: string[]; visionTotal: number }> {
  const probe = makeProbe(["R", "B"], SPEC);
  probes.push(probe);
  const before = new Map([...probe.model.weights].map(([name, w]) => [name, torch.noGrad(() => w.clone())]));
  const samples = probe.samples([
    { image: solidImage(56, [230, 20, 20]), answer: "R" },
    { image: solidImage(56, [20, 20, 230]), answer: "B" },
  ]);
  await train(probe, samples, { steps: 3, lr: 1e-2, batchSize: 2, freezeVision });
  const changed: string[] = [];
  for (const [name, w] of probe.model.weights) {
    const old = before.get(name)!;
    if (!torch.noGrad(() => w.equal(old))) changed.push(name);
    old.dispose();
  }
  const isVision = (name: string) => probe.model.family.isVisionWeight(name);
  return { vision: changed.filter(isVision), language: changed.filter((n) => !isVision(n)), visionTotal: [...probe.model.weights.keys()].filter(isVision).length };
}

test("freeze_vision_tower leaves the vision encoder as loaded and trains the language model", async () => {
  const frozen = await changedAfterTraining(true);
  expect(frozen.visionTotal).toBeGreaterThan(5); // patch embedding, a block, the merger
  expect(frozen.vision).toEqual([]);
  expect(frozen.language).toContain("lm_head.weight");
  expect(frozen.language).toContain("model.layers.0.mlp.down_proj.weight");
});

test("without it the vision encoder trains too", async () => {
  const trained = await changedAfterTraining(false);
  expect(trained.vision).toContain("visual.patch_embed.proj.weight");
  expect(trained.vision).toContain("visual.merger.mlp.0.weight");
});
