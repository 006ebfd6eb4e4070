/**
 * What `vagen sft` writes: checkpoints in the trainer's format (`checkpoints/step_<N>`:
 * the actor's weights and AdamW moments, state.json with the loop's position), one per
 * epoch with `save_every_epoch` and one for the last step, `final/` as a model directory
 * holding the last checkpoint's weights, and the run's config.yaml, which reads back as
 * the same sft config.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeDemoBaseModel } from "../../src/demo/task.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { loadSftConfig, type SftConfig } from "../../src/sft/config.ts";
import { runSft, type SftEvent } from "../../src/sft/trainer.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { listCheckpoints, readTrainerState } from "../../src/training/checkpoint.ts";
import { ONE_BOARD_TASK, TINY_SPEC, oneBoardSftConfig } from "./one-board.ts";

const root = mkdtempSync(join(tmpdir(), "vagen-sft-outputs-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const task = ONE_BOARD_TASK;
const SPEC = TINY_SPEC;

test("checkpoints per epoch and at the end in the trainer's format; final/ is the last one as a model directory", async () => {
  const baseDir = join(root, "base");
  await writeDemoBaseModel(baseDir, task, { seed: 0, spec: SPEC });
  // 8 one-turn samples, 2 steps an epoch.
  const config: SftConfig = oneBoardSftConfig(baseDir, join(root, "sft"), { train: { epochs: 2, batch_size: 4, micro_batch_size: 2, save_every_epoch: true } });
  const events: SftEvent[] = [];
  const result = await runSft(config, (e) => events.push(e));
  const samples = (events.find((e) => e.type === "data") as { samples: number }).samples;
  expect(samples).toBe(8);
  expect(result.steps).toBe(4);

  // One checkpoint after each epoch; the last step's is the second epoch's, not written twice.
  const checkpointRoot = join(config.output_dir, "checkpoints");
  expect(listCheckpoints(checkpointRoot).map((c) => c.step)).toEqual([2, 4]);
  expect(events.filter((e) => e.type === "checkpoint").map((e) => (e as { step: number }).step)).toEqual([2, 4]);
  expect(result.checkpoint).toBe(join(checkpointRoot, "step_4"));
  const state = readTrainerState(result.checkpoint);
  expect(state).toMatchObject({ step: 4, data: { epoch: 1, cursor: 8 }, actorSchedulerStep: 4, klCoef: 0, bestValReward: null });
  for (const f of ["model.safetensors", "optimizer.safetensors"]) expect(existsSync(join(result.checkpoint, "actor", f))).toBe(true);

  // final/ loads as a model and holds the last checkpoint's weights, which training moved.
  expect(result.modelDir).toBe(join(config.output_dir, "final"));
  for (const f of ["config.json", "tokenizer.json", "chat_template.jinja", "preprocessor_config.json", "model.safetensors"]) expect(existsSync(join(result.modelDir, f))).toBe(true);
  const final = loadModelFamily(result.modelDir, { device: "cpu", dtype: "f32" });
  const base = loadModelFamily(baseDir, { device: "cpu", dtype: "f32" });
  const stored = safetensors.load(join(result.checkpoint, "actor", "model.safetensors"));
  try {
    expect(stored.size).toBe(final.weights.size);
    const diff = (a: torch.Tensor, b: torch.Tensor) => torch.tidy(() => a.sub(b).abs().max().item());
    for (const [name, w] of final.weights) expect(diff(w, stored.get(name)!)).toBe(0);
    expect(diff(final.weights.get("lm_head.weight")!, base.weights.get("lm_head.weight")!)).toBeGreaterThan(0);
    // The frozen vision tower is the base model's.
    expect(diff(final.weights.get("visual.patch_embed.proj.weight")!, base.weights.get("visual.patch_embed.proj.weight")!)).toBe(0);
  } finally {
    for (const t of stored.values()) t.dispose();
    final.dispose();
    base.dispose();
  }

  // The run's config.yaml is the config it ran, readable as an sft config again.
  expect(loadSftConfig(join(config.output_dir, "config.yaml"), [])).toEqual(config);
}, 120_000);
