/**
 * LoRA in training (actor.lora_rank): one update moves the adapter only (every base
 * tensor bit-equal) while the reference, the base with the adapter off, keeps the base's
 * log-probs; a short GRPO run on DigitEnv with lora_rank=4 learns, checkpoints hold only
 * the adapter, a resumed run equals an uninterrupted one, and `vagen export` writes a
 * PEFT adapter folder, or with --merge a model whose logits are base + adapter's.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LoraAdapter, attachAdapter, loadModelFamily, type ModelFamily } from "../../src/models/index.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors, type Tensor } from "../../src/torch/index.ts";
import { loadPart } from "../../src/training/checkpoint.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { exportCheckpoint } from "../../src/training/export.ts";
import { policyForward, TrainingModel } from "../../src/training/forward.ts";
import { attachNewAdapter, releaseAdapter } from "../../src/training/lora.ts";
import { runTraining } from "../../src/training/trainer.ts";
import { ParameterOptimizer, trainableWeights } from "../../src/training/update.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";
import { handRow } from "./rows.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
const LORA = ["actor.lora_rank=4", "actor.lora_alpha=8"];

function metrics(dir: string): Record<string, number>[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => Object.fromEntries(Object.entries(JSON.parse(line) as Record<string, number>).filter(([k]) => !k.startsWith("timing_s/") && !k.startsWith("perf/"))));
}

function snapshot(weights: Map<string, Tensor>): Map<string, Float32Array> {
  return new Map([...weights].map(([k, t]) => [k, t.toFloat32Array()]));
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

async function configError(overrides: string[]): Promise<string> {
  try {
    await loadTrainConfig(CONFIG, overrides);
  } catch (err) {
    return (err as Error).message;
  }
  return "(accepted)";
}

describe("LoRA config keys", () => {
  test("defaults are verl's (off, alpha 16, all-linear); bad values name the key", async () => {
    const { config } = await loadTrainConfig(CONFIG, ["actor.lora_rank=8", "actor.target_modules=[q_proj,v_proj]"]);
    expect([config.actor.lora_rank, config.actor.lora_alpha, config.actor.target_modules]).toEqual([8, undefined, ["q_proj", "v_proj"]]);
    expect(await configError(["actor.lora_rank=-1"])).toContain("actor.lora_rank");
    expect(await configError(["actor.lora_rank=1.5"])).toContain("actor.lora_rank");
    expect(await configError(["actor.lora_alpha=0"])).toContain("actor.lora_alpha");
    expect(await configError(["actor.target_modules=[qproj]"])).toContain("actor.target_modules");
    expect(await configError(["actor.target_modules=all"])).toContain("actor.target_modules");
    expect(await configError(["critic.lora_rank=-1"])).toContain("critic.lora_rank");
  });
});

describe("resuming a LoRA checkpoint under other LoRA settings is refused", () => {
  test("without LoRA, at another rank, or with fewer target modules: each an error naming the weight", () => {
    const base = new Map<string, Tensor>([
      ["model.layers.0.self_attn.q_proj.weight", torch.zeros([4, 3])],
      ["model.layers.0.self_attn.v_proj.weight", torch.zeros([2, 3])],
    ]);
    const make = (rank: number, targets: ("q_proj" | "v_proj")[]) => LoraAdapter.create(base, 1, { rank, alpha: 4, targets, seed: 0 }, { device: "cpu", dtype: "f32" });
    const saved = make(2, ["q_proj", "v_proj"]);
    const dir = mkdtempSync(join(tmpdir(), "vagen-lora-part-"));
    safetensors.saveSharded(dir, saved.weights);
    const message = (into: Map<string, Tensor>) => {
      try {
        loadPart(dir, into);
      } catch (err) {
        return `${(err as Error).message} | ${(err as { hint?: string }).hint}`;
      }
      return "(loaded)";
    };
    expect(message(base)).toContain('lacks weight "model.layers.0.self_attn.q_proj.weight" | the checkpoint holds a LoRA adapter');
    const wider = make(4, ["q_proj", "v_proj"]);
    expect(message(wider.weights)).toContain("has shape [2, 3], the run's has [4, 3]");
    const fewer = make(2, ["q_proj"]);
    expect(message(fewer.weights)).toContain('holds adapter weight "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", which the run has no module for');
    for (const a of [saved, wider, fewer]) a.dispose();
    for (const t of base.values()) t.dispose();
  });
});

describe("LoRA training", () => {
  test("an update moves only the adapter; the reference (adapter off) stays the base", () => {
    torch.loadTorch();
    const family = loadModelFamily(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
    const adapter = attachNewAdapter(family, { rank: 4, alpha: 8, targets: ["q_proj", "v_proj", "down_proj"], seed: 1 });
    const actor = new TrainingModel(family, { train: adapter });
    const reference = new TrainingModel(family, { off: adapter });
    expect(actor.weights).toBe(adapter.weights);
    const rows = [handRow({ uid: "a", prompt: [5, 17, 42], response: [8, 99] }), handRow({ uid: "b", prompt: [7, 21], response: [3, 64, 11] })];
    const lp = (m: TrainingModel) => torch.noGrad(() => torch.tidy(() => policyForward(m, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs.toFloat32Array()));
    const before = snapshot(family.weights);
    const adapterBefore = snapshot(adapter.weights);
    const baseLp = lp(reference);
    expect(sameBits(lp(actor), baseLp)).toBe(true); // B = 0: the actor starts as the base
    const optim = new ParameterOptimizer(trainableWeights(actor.weights, family, false), { lr: 1e-2, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8, warmupSteps: 0, style: "constant", minLrRatio: 0, totalSteps: 1 });
    expect(optim.params.length).toBe(2 * 3 * family.spec.numLayers);
    torch.enableGrad(() => torch.tidy(() => policyForward(actor, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs.sum().backward()));
    expect(optim.step(1.0).skipped).toBe(false);
    for (const [name, values] of snapshot(family.weights)) expect([name, sameBits(values, before.get(name)!)]).toEqual([name, true]);
    const after = snapshot(adapter.weights);
    const changed = [...after].filter(([name, v]) => !sameBits(v, adapterBefore.get(name)!)).map(([name]) => name);
    // Adam moves every B (their gradients are nonzero); A's gradient is B^T(...) = 0 at B = 0.
    expect(changed.sort()).toEqual([...after.keys()].filter((n) => n.endsWith("lora_B.weight")).sort());
    expect(sameBits(lp(reference), baseLp)).toBe(true);
    expect(sameBits(lp(actor), baseLp)).toBe(false);
    optim.dispose();
    releaseAdapter(family);
    family.dispose();
  });

  test(
    "GRPO with actor.lora_rank=4 learns DigitEnv; checkpoints hold the adapter; resume is exact; export and --merge",
    async () => {
      const root = mkdtempSync(join(tmpdir(), "vagen-lora-"));
      // learning: 20 steps, greedy validation at the end. The fixture's LM head is random at
      // 0.02, so its logits stay within about +-1 whatever the hidden state, and LoRA does not
      // train the head (PEFT's all-linear leaves it out): the adapters cannot make a digit
      // likely, and the greedy reply was a digit or not by chance. A pretrained head can
      // express a preference; here the fixture's head, scaled by 10, stands for one.
      const scaled = join(root, "scaled-head");
      cpSync(FIXTURE_DIR, scaled, { recursive: true });
      const weights = safetensors.load(join(scaled, "model.safetensors"));
      const head = weights.get("lm_head.weight")!;
      weights.set("lm_head.weight", head.mul(10));
      head.dispose();
      safetensors.save(join(scaled, "model.safetensors"), Object.fromEntries(weights));
      for (const t of weights.values()) t.dispose();
      const learn = join(root, "learn");
      await runTraining(await loadTrainConfig(CONFIG, [`model.model_dir=${scaled}`, `trainer.output_dir=${learn}`, "algorithm.adv_estimator=grpo", "trainer.total_steps=20", "trainer.test_freq=20", ...LORA]));
      const steps = metrics(learn);
      const trainSuccess = steps.map((s) => s["train/digit/success_rate"]).filter((x): x is number => x !== undefined);
      expect(trainSuccess[0]!).toBeLessThanOrEqual(0.2);
      // sampled success rises, not only the greedy reply's
      expect(trainSuccess.slice(-5).reduce((a, b) => a + b, 0) / 5).toBeGreaterThanOrEqual(0.8);
      expect(steps.at(-1)!["val/digit/success_rate"]).toBeGreaterThanOrEqual(0.9);
      // best_actor/ is the adapter too, and exports (merged) as a model directory
      const best = safetensors.readHeader(join(learn, "best_actor", "model.safetensors"));
      expect([...best.tensors.keys()].every((k) => k.includes(".lora_"))).toBe(true);
      expect(exportCheckpoint(join(learn, "best_actor"), join(root, "best-merged"), { merge: true }).tensors).toBeGreaterThan(best.tensors.size);

      // resume: 4 steps straight against 2 steps, then resumed to 4 (with a KL loss, so the reference runs)
      const over = (dir: string, total: number) => [`trainer.output_dir=${dir}`, `trainer.total_steps=${total}`, "trainer.save_freq=1", "actor.use_kl_loss=true", "actor.kl_loss_coef=0.1", "algorithm.adv_estimator=default_gae", ...LORA];
      const straight = join(root, "straight");
      await runTraining(await loadTrainConfig(CONFIG, over(straight, 4)));
      const resumed = join(root, "resumed");
      await runTraining(await loadTrainConfig(CONFIG, over(resumed, 2)));
      await runTraining(await loadTrainConfig(CONFIG, over(resumed, 4)));
      const m = metrics(resumed);
      expect(m.length).toBe(4);
      expect(m).toEqual(metrics(straight));
      expect(m.at(-1)!["actor/kl_loss"]).toBeGreaterThan(0);

      // the checkpoint holds the adapter (PEFT names) and its optimizer state only
      const ckpt = join(straight, "checkpoints", "step_4");
      const stored = safetensors.load(join(ckpt, "actor", "model.safetensors"));
      expect([...stored.keys()].every((k) => /^base_model\.model\.model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj\.lora_[AB]\.weight$/.test(k))).toBe(true);
      expect(stored.size).toBe(2 * 7 * 2); // all-linear on 2 layers
      const opt = safetensors.readHeader(join(ckpt, "actor", "optimizer.safetensors"));
      expect([...opt.tensors.keys()].filter((k) => k.endsWith(".exp_avg")).length).toBe(stored.size); // AdamW moments of the adapter only

      // export: a PEFT adapter folder
      const peft = join(root, "peft");
      exportCheckpoint(ckpt, peft);
      const adapterConfig = JSON.parse(readFileSync(join(peft, "adapter_config.json"), "utf8")) as Record<string, unknown>;
      expect(adapterConfig).toMatchObject({ peft_type: "LORA", r: 4, lora_alpha: 8, target_modules: ".*\\.layers\\.\\d+\\.(self_attn|mlp)\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)" });
      // PEFT's keys over transformers' Qwen2.5-VL class: the decoder is model.language_model
      const exported = safetensors.load(join(peft, "adapter_model.safetensors"));
      const peftName = (k: string) => k.replace("base_model.model.model.layers.", "base_model.model.model.language_model.layers.");
      expect([...exported.keys()].sort()).toEqual([...stored.keys()].map(peftName).sort());
      expect(exported.has("base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight")).toBe(true);
      for (const [k, t] of stored) expect(torch.tidy(() => t.sub(exported.get(peftName(k))!).abs().max().item())).toBe(0);
      for (const t of exported.values()) t.dispose();

      // --merge: a full model directory whose logits are base + adapter's
      const mergedDir = join(root, "merged");
      exportCheckpoint(ckpt, mergedDir, { merge: true });
      for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) expect(existsSync(join(mergedDir, f))).toBe(true);
      const merged = loadModelFamily(mergedDir, { device: "cpu", dtype: "f32" });
      const base = loadModelFamily(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
      const adapter = LoraAdapter.fromWeights(stored, base.spec.numLayers, 8, ckpt);
      attachAdapter(base.weights, adapter);
      const ids = [[5, 17, 42, 8, 99, 3]];
      const logits = (f: ModelFamily) => torch.noGrad(() => torch.tidy(() => f.logits(f.forwardForTraining({ inputIds: ids, images: [[]] })).toFloat32Array()));
      const a = logits(base);
      const b = logits(merged);
      let diff = 0;
      for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
      expect(diff).toBeLessThan(1e-5);
      // the adapter trained: base + adapter is not the base
      const plain = adapter.without(() => logits(base));
      expect(Math.max(...plain.map((v, i) => Math.abs(v - a[i]!)))).toBeGreaterThan(1e-4);
      // untargeted weights are the base's, bit for bit
      for (const name of ["model.embed_tokens.weight", "model.norm.weight", "visual.merger.mlp.2.weight"]) expect(sameBits(merged.weights.get(name)!.toFloat32Array(), base.weights.get(name)!.toFloat32Array())).toBe(true);
      attachAdapter(base.weights, undefined);
      adapter.dispose(); // the checkpoint's tensors are the adapter's
      merged.dispose();
      base.dispose();
    },
    { timeout: 900_000 },
  );

  test(
    "Qwen3: two RL steps with lora_rank=4 and a KL loss train the adapter; the PEFT keys are the checkpoint's, --merge is base + adapter",
    async () => {
      const root = mkdtempSync(join(tmpdir(), "vagen-lora-qwen3-"));
      const run = join(root, "train");
      await runTraining(await loadTrainConfig(CONFIG, [`model.model_dir=${QWEN3_DIR}`, `trainer.output_dir=${run}`, "trainer.total_steps=2", "data.max_response_length=4", "actor.use_kl_loss=true", "actor.target_modules=[q_proj,o_proj,up_proj]", ...LORA,
        // an entropy bonus: when every episode of a step scores alike the advantages are all
        // zero (GRPO's and, with a value head that gives every row the same value, GAE's),
        // and the adapter would rightly not move
        "algorithm.adv_estimator=default_gae", "actor.entropy_coeff=0.01"]));
      const last = metrics(run).at(-1)!;
      expect(last.step).toBe(2);
      expect(last["actor/kl_loss"]).toBeGreaterThan(0); // the actor moved away from its reference, the base
      const ckpt = join(run, "checkpoints", "step_2");
      const stored = safetensors.load(join(ckpt, "actor", "model.safetensors"));
      expect(stored.size).toBe(2 * 3 * 2);
      const peft = join(root, "peft");
      exportCheckpoint(ckpt, peft);
      const exported = safetensors.load(join(peft, "adapter_model.safetensors"));
      expect([...exported.keys()].sort()).toEqual([...stored.keys()].sort());
      expect(JSON.parse(readFileSync(join(peft, "adapter_config.json"), "utf8")).target_modules).toBe(".*\\.layers\\.\\d+\\.(self_attn|mlp)\\.(q_proj|o_proj|up_proj)");
      for (const t of exported.values()) t.dispose();
      const mergedDir = join(root, "merged");
      exportCheckpoint(ckpt, mergedDir, { merge: true });
      const merged = loadModelFamily(mergedDir, { device: "cpu", dtype: "f32" });
      const base = loadModelFamily(QWEN3_DIR, { device: "cpu", dtype: "f32" });
      const adapter = LoraAdapter.fromWeights(stored, base.spec.numLayers, 8, ckpt);
      attachAdapter(base.weights, adapter);
      const ids = [[5, 17, 42, 8, 99, 3]];
      const logits = (f: ModelFamily) => torch.noGrad(() => torch.tidy(() => f.logits(f.forwardForTraining({ inputIds: ids, images: [[]] })).toFloat32Array()));
      const want = logits(base);
      const got = logits(merged);
      expect(Math.max(...got.map((v, i) => Math.abs(v - want[i]!)))).toBeLessThan(1e-5);
      attachAdapter(base.weights, undefined);
      adapter.dispose();
      merged.dispose();
      base.dispose();
    },
    { timeout: 300_000 },
  );
});
