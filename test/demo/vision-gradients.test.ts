/**
 * Gradients reach the vision tower and merger, and they are the right ones: on the tiny
 * fixture in float64, the autograd gradient of a scalar function of a padded batch's
 * logits (two rows, three images, left padding) with respect to the patch embedding, a
 * window-attention block, the full-attention block and the merger equals central finite
 * differences of the same function. A vision tower run without gradients or a detached
 * feature leaves a weight without its gradient; a wrong backward of any op on the image
 * path breaks the equality. (Which row's image lands where is training-forward.test.ts's
 * and image-reading.test.ts's business: finite differences see the same function.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { readPng } from "../../src/models/image-io.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import * as torch from "../../src/torch/index.ts";
import type { Tensor } from "../../src/torch/index.ts";
import { FIXTURE_DIR, refsJson } from "../models/fixture.ts";

const refs = refsJson();
const caseIds = (name: string) => [...refs.cases[name]!.input_ids!];
const caseImages = (name: string) => (refs.cases[name]!.image_keys ?? []).map((k) => readPng(join(FIXTURE_DIR, refs.images[k]!.file)));

let chat: Qwen25VLChatModel;
let probe: Tensor;

/** Two image rows, left-padded: positions and placeholders shift with the padding. */
const names = ["one_image", "two_images"];
const rows = names.map(caseIds);
const T = Math.max(...rows.map((r) => r.length));
const LAST = 4;

beforeAll(() => {
  chat = Qwen25VLChatModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f64" });
  const generator = new torch.Generator({ seed: 7 });
  probe = torch.keep(torch.tidy(() => torch.randn([names.length, LAST, chat.model.config.text.vocabSize], { generator }).to("f64")));
  generator.dispose();
});
afterAll(() => {
  probe.dispose();
  chat.dispose();
});

/** sum(logits of each row's last LAST positions * a fixed random tensor): a scalar that depends on every image. */
function objective(): Tensor {
  const pad = chat.padTokenId;
  const inputIds = rows.map((r) => [...new Array<number>(T - r.length).fill(pad), ...r]);
  const attentionMask = rows.map((r) => [...new Array<number>(T - r.length).fill(0), ...new Array<number>(r.length).fill(1)]);
  return torch.tidy(() => {
    const hidden = chat.forwardForTraining({ inputIds, attentionMask, images: names.map(caseImages) });
    return chat.model.logits(hidden.narrow(1, T - LAST, LAST)).mul(probe).sum();
  });
}

const WEIGHTS = [
  "visual.patch_embed.proj.weight",
  "visual.blocks.0.attn.qkv.weight",
  "visual.blocks.0.mlp.down_proj.weight",
  "visual.blocks.1.attn.qkv.weight",
  "visual.blocks.1.norm1.weight",
  "visual.merger.ln_q.weight",
  "visual.merger.mlp.0.weight",
  "visual.merger.mlp.2.bias",
];

test(
  "autograd gradients of vision-tower and merger weights equal central finite differences (float64)",
  () => {
    const weights = chat.model.weights;
    for (const p of weights.values()) p.requiresGrad_(true);
    try {
      torch.tidy(() => objective().backward());
    } finally {
      for (const p of weights.values()) p.requiresGrad_(false);
    }
    const errors: { name: string; index: number; error: number }[] = [];
    for (const name of WEIGHTS) {
      const w = weights.get(name)!;
      const gradTensor = w.grad;
      if (!gradTensor) throw new Error(`${name} got no gradient: is the vision tower run without gradients, or its features detached?`);
      const grad = gradTensor.toFloat64Array();
      gradTensor.dispose();
      w.grad = undefined;
      const flat = w.reshape([-1]);
      // The largest entry, and a few fixed others spread over the tensor.
      const largest = [...grad.keys()].reduce((a, b) => (Math.abs(grad[b]!) > Math.abs(grad[a]!) ? b : a), 0);
      const picks = [largest, ...[0.13, 0.41, 0.77].map((f) => Math.floor(f * grad.length))];
      const scale = Math.max(...grad.map(Math.abs));
      expect(scale).toBeGreaterThan(0);
      for (const i of picks) {
        const entry = flat.narrow(0, i, 1);
        const original = entry.item();
        const eps = 1e-5;
        entry.fill_(original + eps);
        const up = objective().item();
        entry.fill_(original - eps);
        const down = objective().item();
        entry.fill_(original);
        entry.dispose();
        const numeric = (up - down) / (2 * eps);
        // Rotary tables are float32 by design (as in transformers), so agreement is ~1e-6, not 1e-10.
        errors.push({ name, index: i, error: Math.abs(grad[i]! - numeric) / scale });
      }
      flat.dispose();
    }
    const worst = errors.reduce((a, b) => (b.error > a.error ? b : a));
    expect(worst.error).toBeLessThan(1e-4);
  },
  60_000,
);
