/**
 * Load and forward time of vagen's Qwen2.5-VL on one device, for bench/RESULTS.md.
 *
 *   bun bench/qwen_forward.ts MODEL_DIR [--device cuda] [--dtype f32,bf16] [--json OUT.json]
 *
 * MODEL_DIR is a directory made by test/fixtures/qwen2_5_vl_tiny/make_fixture.py (the
 * published 3B configuration with random weights for the H200 figures); its refs.json /
 * refs.safetensors give the one-image prompt. Timed, like the transformers side in
 * make_fixture.py: load (safetensors -> device, dtype), then the median of 5 forwards
 * after one warm-up of (a) the one-image prompt including the vision tower and (b) a text
 * batch of 8 x 512 tokens; logits stay on the device; the clock stops after a device sync.
 */
import { writeFileSync } from "node:fs";
import * as torch from "../src/torch/index.ts";
import type { DType, Device } from "../src/torch/index.ts";
import { Qwen25VLModel } from "../src/models/qwen2_5_vl/model.ts";
import { refGrids, refRows, refTensor } from "../test/models/parity.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
}

function sync(device: Device): void {
  if (device.startsWith("cuda")) torch.cuda.synchronize();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeIt(device: Device, fn: () => void, runs = 5): number {
  fn();
  sync(device);
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    sync(device);
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

const dir = process.argv[2];
if (!dir) {
  console.error("usage: bun bench/qwen_forward.ts MODEL_DIR [--device cuda] [--dtype f32,bf16] [--json OUT.json]");
  process.exit(2);
}
const device = arg("device", "cuda") as Device;
const dtypes = arg("dtype", "f32,bf16").split(",") as DType[];
const results: Record<string, Record<string, number>> = {};

for (const dtype of dtypes) {
  sync(device);
  const t0 = performance.now();
  const model = Qwen25VLModel.load(dir, { device, dtype });
  sync(device);
  const loadS = (performance.now() - t0) / 1000;
  const ids = refRows("one_image.input_ids", dir);
  const grids = refGrids("one_image.image_grid_thw", dir);
  const pixels = torch.keep(refTensor("one_image.pixel_values", dir, device));
  const textIds = Array.from({ length: 8 }, (_, b) => Array.from({ length: 512 }, (_, t) => (b * 7919 + t * 104729) % 150000));
  const oneImage = timeIt(device, () =>
    torch.noGrad(() => torch.tidy(() => void model.logits(model.forwardBatch({ inputIds: ids, pixelValues: pixels, imageGridThw: grids }).hidden))),
  );
  const text = timeIt(device, () => torch.noGrad(() => torch.tidy(() => void model.logits(model.forwardBatch({ inputIds: textIds }).hidden))));
  pixels.dispose();
  model.dispose();
  results[dtype] = { load_s: loadS, forward_one_image_s: oneImage, forward_text_8x512_s: text, one_image_seq_len: ids[0]!.length };
  console.log(`vagen ${dtype}: ${JSON.stringify(results[dtype])}`);
}

const out = arg("json", "");
if (out) writeFileSync(out, JSON.stringify(results, null, 1));
