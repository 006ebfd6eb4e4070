/**
 * Stage-by-stage comparison of vagen's Qwen2.5-VL with transformers on a reference
 * directory made by test/fixtures/qwen2_5_vl_parity/make_parity.py:
 *
 *   bun test/models/parity-bisect.ts DIR [--device cpu|cuda] [--dtype f32|bf16] [--case NAME]
 *
 * Per case it prints the largest relative error (max |a - b| / max |b|) of: vagen's own
 * prompt ids and pixel values (from the case's messages and PNGs), the patch embedding,
 * every vision block, the merger, the image features, the merged input embeddings, the
 * M-RoPE position ids, every decoder layer's hidden state (when the reference has them),
 * the logits, and whether 12 greedy tokens agree. The first stage that disagrees is where
 * the bug is.
 */
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import type { DType, Device, Tensor } from "../../src/torch/index.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { readPng } from "../../src/models/image-io.ts";
import type { TemplateMessage as ChatMessage } from "../../src/models/chat-template.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { fixtureMessages, maxRelativeError, ref, refsJson, refTensors } from "./fixture.ts";

export interface StageError {
  stage: string;
  error: number;
}

export interface CaseReport {
  name: string;
  stages: StageError[];
  greedy: number[];
  expectedGreedy: number[];
}

function hostF64(t: Tensor): Float64Array {
  return Float64Array.from(t.to("f32").contiguous().toArray() as Float32Array);
}

/** Greedy tokens by full recompute each step, as the reference made them. */
export function greedyRecompute(chat: Qwen25VLChatModel, ids: number[], pixels: Tensor, grids: number[][], n: number): number[] {
  const out: number[] = [];
  const cur = [...ids];
  for (let i = 0; i < n; i++) {
    const next = torch.noGrad(() =>
      torch.tidy(() => {
        const fw = chat.model.forwardBatch({ inputIds: [cur], pixelValues: grids.length ? pixels : undefined, imageGridThw: grids });
        const last = fw.hidden.narrow(1, cur.length - 1, 1);
        return Number((chat.model.logits(last).to("f32").argmax(-1).toArray() as BigInt64Array)[0]);
      }),
    );
    out.push(Number(next));
    cur.push(Number(next));
  }
  return out;
}

/**
 * A case's reference pixel values. A slim fixture stores them only for the one-image
 * cases named after their image; multi-image cases concatenate those, in image order.
 */
export function casePixels(dir: string, name: string, imageKeys: readonly string[], device: Device): Tensor {
  const refs = refTensors(dir);
  const parts = refs.has(`${name}.pixel_values`) ? [ref(`${name}.pixel_values`, dir)] : imageKeys.map((k) => ref(`${k}.pixel_values`, dir));
  const width = parts[0]!.shape[1]!;
  const rows = parts.reduce((s, p) => s + p.shape[0]!, 0);
  const flat = new Float32Array(rows * width);
  let o = 0;
  for (const p of parts) {
    flat.set(p.values, o);
    o += p.values.length;
  }
  return torch.tensor(flat, [rows, width], { dtype: "f32", device });
}

export function bisectCase(chat: Qwen25VLChatModel, dir: string, name: string, opts: { greedy?: boolean } = {}): CaseReport {
  const meta = refsJson(dir) as unknown as {
    cases: Record<string, { messages: ChatMessage[]; image_keys: string[]; logit_positions: number; greedy: number[] }>;
    images: Record<string, { file: string }>;
    new_tokens?: number;
  };
  const c = meta.cases[name]!;
  const stages: StageError[] = [];
  const refs = refTensors(dir);
  const model = chat.model;
  const device = model.device;
  const push = (stage: string, actual: ArrayLike<number>, key: string) => {
    if (!refs.has(key)) return; // a slim (committed) fixture keeps only some stages
    const expected = ref(key, dir);
    const error = actual.length === expected.values.length ? maxRelativeError(actual, expected.values) : Number.POSITIVE_INFINITY;
    stages.push({ stage, error });
  };

  // 1. vagen's own preprocessing on the same messages and PNGs.
  const images = c.image_keys.map((k) => readPng(join(dir, meta.images[k]!.file)));
  const encoded = chat.processor.encodeChat(c.messages, images);
  const refIds = Array.from(ref(`${name}.input_ids`, dir).values);
  stages.push({ stage: "prompt ids", error: JSON.stringify(encoded.inputIds) === JSON.stringify(refIds) ? 0 : Number.POSITIVE_INFINITY });
  if (encoded.images) {
    const expected = casePixels(dir, name, c.image_keys, "cpu");
    const values = Float64Array.from(expected.toArray() as Float32Array);
    expected.dispose();
    stages.push({ stage: "pixel values", error: maxRelativeError(encoded.images.pixelValues, values) });
  }

  // 2. The model on the reference's own ids and pixels.
  const pixels = casePixels(dir, name, c.image_keys, device);
  const g = ref(`${name}.image_grid_thw`, dir);
  const grids = Array.from({ length: g.shape[0]! }, (_, i) => Array.from(g.values.subarray(i * 3, i * 3 + 3)));
  torch.noGrad(() =>
    torch.tidy(() => {
      // Each block's own contribution (output - input) too: with small default-init weights
      // the residual stream hides a wrong block update inside a small relative error.
      let previous: { mine: Float64Array; theirs: Float64Array } | undefined;
      const features = model.vision.encode(pixels, grids, (stage, value) => {
        if (!refs.has(`${name}.${stage}`)) return;
        const mine = hostF64(value);
        const theirs = ref(`${name}.${stage}`, dir).values;
        push(stage, mine, `${name}.${stage}`);
        if (previous && stage.startsWith("vision.block")) {
          const dm = mine.map((x, i) => x - previous!.mine[i]!);
          const dt = theirs.map((x, i) => x - previous!.theirs[i]!);
          stages.push({ stage: `  ${stage.slice(7)} update`, error: maxRelativeError(dm, dt) });
        }
        previous = stage === "vision.merger" ? undefined : { mine, theirs };
      });
      push("image features", hostF64(features), `${name}.image_features`);
      const embeds = model.mergeImageFeatures([refIds], model.embed([refIds]), features);
      push("inputs embeds", hostF64(embeds), `${name}.inputs_embeds`);
      const { positionIds } = model.positionIds([refIds], undefined, grids);
      if (refs.has(`${name}.lm_position_ids`)) {
        const expected = ref(`${name}.lm_position_ids`, dir);
        const mine = Float64Array.from(positionIds.toArray() as BigInt64Array, Number);
        // transformers may prepend a text-position row: compare the last three axes.
        const tail = expected.values.subarray(expected.values.length - mine.length);
        stages.push({ stage: "position ids", error: mine.every((v, i) => v === tail[i]) ? 0 : Number.POSITIVE_INFINITY });
      }
      const hidden = model.forward({ inputsEmbeds: embeds, positionIds });
      const logits = model.logits(hidden).squeeze(0);
      const keep = c.logit_positions;
      const T = refIds.length;
      const kept = hostF64(logits.narrow(0, T - keep, keep));
      push("logits", kept, `${name}.logits`);
      push("logits vs ref bf16", kept, `${name}.logits_bf16`);
      // For scale: how far transformers' own bf16 logits are from its f32 logits.
      if (refs.has(`${name}.logits_bf16`)) {
        stages.push({ stage: "(ref bf16 vs f32)", error: maxRelativeError(ref(`${name}.logits_bf16`, dir).values, ref(`${name}.logits`, dir).values) });
      }
    }),
  );
  const greedy = opts.greedy === false ? [] : greedyRecompute(chat, refIds, pixels, grids, meta.new_tokens ?? 12);
  pixels.dispose();
  return { name, stages, greedy, expectedGreedy: c.greedy };
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const dir = args[0]!;
  const flag = (n: string, d: string) => {
    const i = args.indexOf(n);
    return i >= 0 ? args[i + 1]! : d;
  };
  const device = flag("--device", "cpu") as Device;
  const dtype = flag("--dtype", "f32") as DType;
  const only = flag("--case", "");
  const chat = Qwen25VLChatModel.load(dir, { device, dtype });
  const meta = refsJson(dir) as unknown as { cases: Record<string, { greedy: number[]; greedy_bf16?: number[] }> };
  // --engine: the same cases through the serving engine (prompt built from messages with
  // pixels, KV cache, batched decode), which `vagen generate`, `serve` and `eval` run on.
  const engine = args.includes("--engine") ? loadEngine(dir, { device, dtype: dtype as "f32" | "bf16", max_seq_len: 1024, max_slots: 4 }) : undefined;
  for (const name of Object.keys(meta.cases)) {
    if (only && name !== only) continue;
    if (engine) {
      const c = meta.cases[name]!;
      const out = await engine.engine.generate({ prompt: engine.builder.buildPrompt(fixtureMessages(dir, name)), sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } });
      const expected = dtype === "bf16" ? (c.greedy_bf16 ?? c.greedy) : c.greedy;
      const same = out.tokenIds.filter((t: number, i: number) => t === expected[i]).length;
      console.log(`== ${name} (${device} ${dtype}, engine): greedy ${same}/${expected.length} equal${same < expected.length ? ` vagen ${JSON.stringify(out.tokenIds)} ref ${JSON.stringify(expected)}` : ""}`);
      continue;
    }
    const r = bisectCase(chat, dir, name, { greedy: !args.includes("--no-greedy") });
    const expected = dtype === "bf16" ? (meta.cases[name]!.greedy_bf16 ?? r.expectedGreedy) : r.expectedGreedy;
    const same = r.greedy.filter((t, i) => t === expected[i]).length;
    console.log(`== ${name} (${device} ${dtype}): greedy ${same}/${expected.length} equal`);
    for (const s of r.stages) console.log(`   ${s.stage.padEnd(18)} ${s.error.toExponential(2)}`);
    if (same < expected.length) console.log(`   vagen ${JSON.stringify(r.greedy)}\n   ref   ${JSON.stringify(expected)}`);
  }
  await engine?.close();
}
