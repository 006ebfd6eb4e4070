/**
 * LoRA for the critic (critic.lora_rank): the critic trains an adapter of its own and its
 * value head over a frozen base. When the actor trains LoRA too, that base is the actor's
 * own family: one copy of the model, each forward of the critic running with its adapter
 * in place of the actor's. A critic update moves only the critic's adapter and head (the
 * base and the actor's adapter bit-equal); the checkpoint's critic part holds the adapter
 * and the head; a resumed run equals an uninterrupted one.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoraAdapter, adapterOf, loadModelFamily } from "../../src/models/index.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors, type Tensor } from "../../src/torch/index.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { policyForward, TrainingModel, valueForward } from "../../src/training/forward.ts";
import { attachNewAdapter, releaseAdapter } from "../../src/training/lora.ts";
import { runTraining } from "../../src/training/trainer.ts";
import { ParameterOptimizer, trainableWeights } from "../../src/training/update.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";
import { handRow } from "./rows.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");

function snapshot(weights: Map<string, Tensor>): Map<string, Float32Array> {
  return new Map([...weights].map(([k, t]) => [k, t.toFloat32Array()]));
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

function changedNames(before: Map<string, Float32Array>, now: Map<string, Tensor>): string[] {
  return [...snapshot(now)].filter(([name, v]) => !sameBits(v, before.get(name)!)).map(([name]) => name).sort();
}

function metrics(dir: string): Record<string, number>[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => Object.fromEntries(Object.entries(JSON.parse(line) as Record<string, number>).filter(([k]) => !k.startsWith("timing_s/") && !k.startsWith("perf/"))));
}

describe("critic LoRA over the actor's base", () => {
  test("a critic update moves only the critic's adapter and head; the actor's adapter is back in place after each critic forward", () => {
    torch.loadTorch();
    const family = loadModelFamily(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
    const actorAdapter = attachNewAdapter(family, { rank: 4, alpha: 8, targets: ["q_proj", "v_proj"], seed: 1 });
    const criticAdapter = LoraAdapter.create(family.weights, family.spec.numLayers, { rank: 4, alpha: 8, targets: ["q_proj", "v_proj", "down_proj"], seed: 2 }, { device: "cpu", dtype: "f32" });
    const actor = new TrainingModel(family, { train: actorAdapter });
    const critic = new TrainingModel(family, { swap: criticAdapter });
    expect(critic.weights).toBe(criticAdapter.weights);
    const head = critic.newValueHead(0);
    const named = new Map(critic.weights);
    for (const [name, t] of head.entries()) named.set(name, t);
    const rows = [handRow({ uid: "a", prompt: [5, 17, 42], response: [8, 99] }), handRow({ uid: "b", prompt: [7, 21], response: [3, 64, 11] })];
    const lp = () => torch.noGrad(() => torch.tidy(() => policyForward(actor, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs.toFloat32Array()));
    const values = () => torch.noGrad(() => torch.tidy(() => valueForward(critic, head, rows).toFloat32Array()));

    const base = snapshot(family.weights);
    const actorBefore = snapshot(actorAdapter.weights);
    const criticBefore = snapshot(named);
    const lpBefore = lp();
    const optim = new ParameterOptimizer(trainableWeights(named, family, false), { lr: 1e-2, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8, warmupSteps: 0, style: "constant", minLrRatio: 0, totalSteps: 2 });
    expect(optim.params.length).toBe(2 * 3 * family.spec.numLayers + head.entries().length);
    for (let step = 0; step < 2; step++) {
      torch.enableGrad(() => torch.tidy(() => valueForward(critic, head, rows).square().sum().backward()));
      expect(adapterOf(family.weights)).toBe(actorAdapter);
      expect(optim.step(1.0).skipped).toBe(false);
    }
    expect(changedNames(base, family.weights)).toEqual([]);
    expect(changedNames(actorBefore, actorAdapter.weights)).toEqual([]);
    expect(sameBits(lp(), lpBefore)).toBe(true);
    // Step 1 moves every B and the head (A's gradient is B^T(...) = 0 at B = 0); step 2 then moves the A's too.
    expect(changedNames(criticBefore, named)).toEqual([...named.keys()].sort());

    // The critic's values are its own adapter's: with the actor's adapter in its place they differ.
    const own = values();
    const withActors = torch.noGrad(() => torch.tidy(() => valueForward(new TrainingModel(family), head, rows).toFloat32Array()));
    expect(Math.max(...own.map((v, i) => Math.abs(v - withActors[i]!)))).toBeGreaterThan(1e-6);
    optim.dispose();
    criticAdapter.dispose();
    releaseAdapter(family);
    family.dispose();
  });

  test(
    "PPO with actor and critic LoRA: the critic checkpoint is its adapter and head; resume is exact; a critic LoRA beside a full actor has its own base",
    async () => {
      const root = mkdtempSync(join(tmpdir(), "vagen-critic-lora-"));
      const over = (dir: string, total: number, extra: string[] = []) => [
        `trainer.output_dir=${dir}`, `trainer.total_steps=${total}`, "trainer.save_freq=1", "algorithm.adv_estimator=default_gae",
        "actor.lora_rank=4", "actor.lora_alpha=8", "critic.lora_rank=2", "critic.lora_alpha=4", "critic.target_modules=[q_proj,v_proj]", ...extra,
      ];
      const straight = join(root, "straight");
      await runTraining(await loadTrainConfig(CONFIG, over(straight, 3)));
      const resumed = join(root, "resumed");
      await runTraining(await loadTrainConfig(CONFIG, over(resumed, 2)));
      await runTraining(await loadTrainConfig(CONFIG, over(resumed, 3)));
      const m = metrics(resumed);
      expect(m.length).toBe(3);
      expect(m).toEqual(metrics(straight));
      expect(m.at(-1)!["critic/vf_loss"]).toBeGreaterThan(0);

      const stored = safetensors.readHeader(join(straight, "checkpoints", "step_3", "critic", "model.safetensors"));
      const names = [...stored.tensors.keys()];
      const lora = names.filter((k) => k.includes(".lora_"));
      expect(lora.length).toBe(2 * 2 * 2); // q_proj and v_proj, A and B, 2 layers
      expect(lora.every((k) => /\.(q_proj|v_proj)\.lora_[AB]\.weight$/.test(k))).toBe(true);
      expect(names.filter((k) => !k.includes(".lora_")).every((k) => k.startsWith("value_head."))).toBe(true);
      const opt = safetensors.readHeader(join(straight, "checkpoints", "step_3", "critic", "optimizer.safetensors"));
      expect([...opt.tensors.keys()].filter((k) => k.endsWith(".exp_avg")).length).toBe(names.length);

      // A full-weight actor: the critic's adapter sits on a base copy of its own.
      const full = join(root, "full-actor");
      await runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${full}`, "trainer.total_steps=1", "algorithm.adv_estimator=default_gae", "critic.lora_rank=2"]));
      const fullCritic = [...safetensors.readHeader(join(full, "checkpoints", "step_1", "critic", "model.safetensors")).tensors.keys()];
      expect(fullCritic.filter((k) => !k.includes(".lora_")).every((k) => k.startsWith("value_head."))).toBe(true);
      const fullActor = [...safetensors.readHeader(join(full, "checkpoints", "step_1", "actor", "model.safetensors")).tensors.keys()];
      expect(fullActor).toContain("model.embed_tokens.weight");
    },
    { timeout: 600_000 },
  );
});
