/**
 * `vagen sft` with LoRA (train.lora_rank): only the adapter trains and checkpoints (the
 * base's tensors are not in the checkpoint; the optimizer holds the adapter's moments),
 * the loss falls, and final/ is the base with the adapter merged in: its logits are
 * base + adapter's.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeDemoBaseModel } from "../../src/demo/task.ts";
import { LoraAdapter, attachAdapter, loadModelFamily, type ModelFamily } from "../../src/models/index.ts";
import type { SftConfig } from "../../src/sft/config.ts";
import { runSft, type SftEvent } from "../../src/sft/trainer.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { ONE_BOARD_TASK, TINY_SPEC, oneBoardSftConfig } from "./one-board.ts";

const root = mkdtempSync(join(tmpdir(), "vagen-sft-lora-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const task = ONE_BOARD_TASK;
const SPEC = TINY_SPEC;

test("train.lora_rank=4: the checkpoint is the adapter, the loss falls, final/ is base + adapter merged", async () => {
  const baseDir = join(root, "base");
  await writeDemoBaseModel(baseDir, task, { seed: 0, spec: SPEC });
  const config: SftConfig = oneBoardSftConfig(baseDir, join(root, "sft"), {
    optim: { lr: 1e-2 },
    train: { epochs: 4, batch_size: 4, micro_batch_size: 2, freeze_vision_tower: false, lora_rank: 4, lora_alpha: 8, target_modules: ["q_proj", "v_proj", "gate_proj"] },
  });
  const events: SftEvent[] = [];
  const result = await runSft(config, (e) => events.push(e));
  const losses = events.flatMap((e) => (e.type === "step" ? [e.loss] : []));
  expect(losses.length).toBe(8);
  expect(losses.at(-1)!).toBeLessThan(losses[0]!);

  const stored = safetensors.load(join(result.checkpoint, "actor", "model.safetensors"));
  expect([...stored.keys()].sort()).toEqual(
    ["self_attn.q_proj", "self_attn.v_proj", "mlp.gate_proj"].flatMap((m) => ["A", "B"].map((x) => `base_model.model.model.layers.0.${m}.lora_${x}.weight`)).sort(),
  );
  const opt = safetensors.readHeader(join(result.checkpoint, "actor", "optimizer.safetensors"));
  expect([...opt.tensors.keys()].filter((k) => k.endsWith(".exp_avg")).length).toBe(6);

  const ids = [[3, 4, 5, 6, 7]];
  const logits = (f: ModelFamily) => torch.noGrad(() => torch.tidy(() => f.logits(f.forwardForTraining({ inputIds: ids, images: [[]] })).toFloat32Array()));
  const merged = loadModelFamily(result.modelDir, { device: "cpu", dtype: "f32" });
  const base = loadModelFamily(baseDir, { device: "cpu", dtype: "f32" });
  const adapter = LoraAdapter.fromWeights(stored, base.spec.numLayers, 8, result.checkpoint);
  attachAdapter(base.weights, adapter);
  const want = logits(base);
  const got = logits(merged);
  expect(Math.max(...got.map((v, i) => Math.abs(v - want[i]!)))).toBeLessThan(1e-5);
  const plain = adapter.without(() => logits(base));
  expect(Math.max(...plain.map((v, i) => Math.abs(v - want[i]!)))).toBeGreaterThan(1e-4);
  attachAdapter(base.weights, undefined);
  adapter.dispose();
  merged.dispose();
  base.dispose();
}, 300_000);
