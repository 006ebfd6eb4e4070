/**
 * How fast and how well the demo's supervised phase learns the move, for one setting:
 * builds the demo's base policy (optionally with another spec), trains on solver
 * demonstrations for a time budget, and every few steps reports the training loss and
 * the held-out *move accuracy* (teacher-forced argmax on every reply token of clean BFS
 * demonstrations from the validation seeds). Ends with greedy validation episodes.
 *
 *   OMP_NUM_THREADS=2 bun bench/demo/sft-probe.ts '{"seconds":120,"spec":{"initializerRange":0.1}}'
 *   OMP_NUM_THREADS=1 bun bench/demo/sft-probe.ts '{"seconds":300,"random":0.1,"episodes":1024,"freeze":["visual."]}'
 *
 * Options (JSON): seconds, steps, episodes, random, careless (share of careless-solver
 * episodes), randomMoves (any|safe), lr, batch, render (vision|text), size,
 * p, evalEvery, valEpisodes, heldOut, seed, device, wd, spec (TinyQwenSpec fields), freeze
 * (weight-name prefixes left untrained), visionLr (train the vision tower and merger by their own
 * AdamW at this lr).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { Rng } from "../../src/core/rng.ts";
import { messageText } from "../../src/core/chat.ts";
import { DEMO_MODEL_SPEC } from "../../src/demo/model-dir.ts";
import { demoSolverData, demoTask, writeDemoBaseModel } from "../../src/demo/task.ts";
import { validate } from "../../src/demo/validate.ts";
import type { ConversationRecord } from "../../src/models/conversation.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { saveSftCheckpoint, writeFinalModel } from "../../src/sft/checkpoint.ts";
import { solverEpisodes } from "../../src/sft/episodes.ts";
import { batchLoss } from "../../src/sft/loss.ts";
import { episodeSamples } from "../../src/sft/samples.ts";
import { TrainingModel } from "../../src/training/forward.ts";

const o = {
  seconds: 120, episodes: 256, random: 0.35, lr: 2e-3, batch: 32, render: "vision", size: 4, p: 0.8,
  evalEvery: 25, careless: 0, randomMoves: "any", steps: 1e9, valEpisodes: 32, heldOut: 64, seed: 0, device: "cpu", wd: 0, spec: {} as Record<string, number>,
  ...JSON.parse(process.argv[2] ?? "{}"),
};
const spec = { ...DEMO_MODEL_SPEC, ...o.spec };
const task = demoTask("frozenlake", o.render, { size: o.size, p: o.p });
const root = mkdtempSync(join(tmpdir(), "sft-probe-"));
const t0 = performance.now();
const info = await writeDemoBaseModel(join(root, "base"), task, { seed: o.seed, spec });
torch.manualSeed(o.seed);
const model = new TrainingModel(loadModelFamily(join(root, "base"), { device: o.device, dtype: "f32" }));
const codec = model.family.conversationCodec();
const replies = { encode: (t: string) => model.family.tokenizer.encode(t) };
const train = (await solverEpisodes(demoSolverData(task, o.episodes, o.random, { carelessEpisodeProb: o.careless, randomMoves: o.randomMoves }), { seed: o.seed })).flatMap((e) => episodeSamples(e, task.harness, codec, replies));
const heldEpisodes = await solverEpisodes({ ...demoSolverData(task, o.heldOut, 0), seed_start: task.valSeedStart }, { seed: o.seed });
const held = heldEpisodes.flatMap((e) => episodeSamples(e, task.harness, codec, replies));
console.log(JSON.stringify({ parameters: info.parameters, vocab: info.vocabSize, train: train.length, held: held.length, tokens: train[0]!.tokenIds.length, setup_s: (performance.now() - t0) / 1000 }));
console.log("observation:", JSON.stringify(messageText(heldEpisodes[0]!.observations[0]!)).slice(0, 300), "reply:", heldEpisodes[0]!.replies[0]);

/** Share of samples whose every reply token is the model's argmax (teacher forced). */
function exactReplies(samples: readonly ConversationRecord[]): number {
  let exact = 0;
  torch.noGrad(() => {
    for (const s of samples) {
      torch.tidy(() => {
        const out = batchLoss(model, [s]);
        if (out.correct === out.tokens) exact++;
      });
    }
  });
  return exact / samples.length;
}

// `freeze`: weight-name prefixes left untrained (e.g. "visual." for the vision tower).
const frozen = (name: string) => (o.freeze as string[] | undefined)?.some((prefix) => name.startsWith(prefix)) ?? false;
// `visionLr`: the vision tower and merger trained by their own AdamW at this lr.
const isVision = (name: string) => model.family.isVisionWeight(name);
const separateVision = o.visionLr !== undefined;
const params = [...model.weights].filter(([name]) => !frozen(name) && !(separateVision && isVision(name))).map(([, w]) => w);
const visionParams = separateVision ? [...model.weights].filter(([name]) => isVision(name)).map(([, w]) => w) : [];
const trained = [...params, ...visionParams];
for (const p of trained) p.requiresGrad_(true);
const opt = new torch.optim.AdamW(params, { lr: o.lr, weightDecay: o.wd });
const visionOpt = separateVision ? new torch.optim.AdamW(visionParams, { lr: o.visionLr, weightDecay: o.wd }) : undefined;
const rng = new Rng(o.seed, 3);
let step = 0;
let trainSeconds = 0;
const start = performance.now();
let losses: number[] = [];
while (trainSeconds < o.seconds && step < o.steps) {
  const stepStart = performance.now();
  const batch = Array.from({ length: o.batch }, () => train[rng.int(train.length)]!);
  const tokens = batch.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
  torch.tidy(() => {
    const out = batchLoss(model, batch);
    out.lossSum.div(tokens).backward();
    losses.push(out.lossSum.item() / tokens);
  });
  const withGrad = trained.filter((p) => { const g = p.grad; g?.dispose(); return g !== undefined; });
  torch.optim.clipGradNorm(withGrad, 1.0).dispose();
  torch.noGrad(() => { opt.step(); visionOpt?.step(); });
  opt.zeroGrad();
  visionOpt?.zeroGrad();
  step++;
  trainSeconds += (performance.now() - stepStart) / 1000;
  if (step % o.evalEvery === 0) {
    for (const p of trained) p.requiresGrad_(false);
    const acc = exactReplies(held);
    for (const p of trained) p.requiresGrad_(true);
    const loss = losses.reduce((a, b) => a + b, 0) / losses.length;
    losses = [];
    console.log(JSON.stringify({ step, s: Math.round(trainSeconds), loss: +loss.toFixed(4), held_exact: +acc.toFixed(3) }));
  }
}
for (const p of trained) { p.grad = undefined; p.requiresGrad_(false); }
// The language model's optimizer state goes with the weights (a separate vision optimizer's does not).
const checkpoint = saveSftCheckpoint(join(root, "checkpoints"), model, opt, { step, epoch: 0, cursor: 0, schedulerStep: step });
writeFinalModel(checkpoint, join(root, "base"), join(root, "sft"));
const steps_s = step / trainSeconds;
opt.dispose();
visionOpt?.dispose();
model.family.dispose();
const v0 = performance.now();
const val = await validate(task, { modelDir: join(root, "sft"), outputDir: join(root, "val"), episodes: o.valEpisodes, device: o.device, maxTokens: 10 });
console.log(JSON.stringify({ done: true, steps: step, steps_per_s: +steps_s.toFixed(2), success: val.successRate, val_s: Math.round((performance.now() - v0) / 1000), dir: root }));
