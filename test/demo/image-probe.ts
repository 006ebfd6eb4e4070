/**
 * Helpers of the image-reading probes: a small Qwen2.5-VL made in-process over a
 * tokenizer that knows the probe's answers, one-turn samples [image] -> answer, and a
 * supervised loop over them that reports how many answers the model's argmax gets right.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { imagePart, type ChatMessage } from "../../src/core/chat.ts";
import type { RGBImage } from "../../src/core/image.ts";
import { DEMO_MODEL_SPEC, writeTinyQwenModelDir, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { trainBpeTokenizer } from "../../src/demo/tokenizer.ts";
import { Conversation, type ConversationRecord } from "../../src/models/conversation.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { trainOnSamples } from "../../src/sft/trainer.ts";
import { TrainingModel } from "../../src/training/forward.ts";

export function solidImage(size: number, rgb: readonly [number, number, number]): RGBImage {
  const data = new Uint8Array(size * size * 3);
  for (let i = 0; i < size * size; i++) data.set(rgb, i * 3);
  return { width: size, height: size, data };
}

/** A cells x cells board of dark cells, `cell` lit (row-major index). */
export function litCellImage(cells: number, cellPx: number, lit: number): RGBImage {
  const size = cells * cellPx;
  const image = solidImage(size, [20, 20, 60]);
  const [r, c] = [Math.floor(lit / cells), lit % cells];
  for (let y = r * cellPx; y < (r + 1) * cellPx; y++) {
    for (let x = c * cellPx; x < (c + 1) * cellPx; x++) image.data.set([250, 230, 40], (y * size + x) * 3);
  }
  return image;
}

export interface Probe {
  model: TrainingModel;
  samples(cases: readonly { image: RGBImage; answer: string }[]): ConversationRecord[];
  dispose(): void;
}

/** A model directory of `spec` over a tokenizer learned on `answers`, loaded in f32. */
export function makeProbe(answers: readonly string[], spec: TinyQwenSpec = DEMO_MODEL_SPEC, seed = 0): Probe {
  const root = mkdtempSync(join(tmpdir(), "vagen-image-probe-"));
  const corpus = ["system\nYou are a helpful assistant.\nuser\nassistant\n", ...answers.flatMap((a) => Array<string>(4).fill(a))];
  writeTinyQwenModelDir(join(root, "model"), spec, trainBpeTokenizer(corpus, { maxMerges: 50 }), { seed });
  const model = new TrainingModel(loadModelFamily(join(root, "model"), { device: "cpu", dtype: "f32" }));
  const codec = model.family.conversationCodec();
  return {
    model,
    samples: (cases) =>
      cases.map(({ image, answer }) => {
        const conversation = new Conversation(codec);
        const message: ChatMessage = { role: "user", content: [imagePart(image)] };
        conversation.addMessage(message);
        conversation.beginReply();
        conversation.addReply({ tokenIds: [...model.family.tokenizer.encode(answer), conversation.endOfTurnId()] });
        return conversation.record();
      }),
    dispose: () => {
      model.family.dispose();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Supervised steps on `samples`; returns the per-step token accuracy. */
export async function train(probe: Probe, samples: readonly ConversationRecord[], opts: { steps: number; lr: number; batchSize: number; seed?: number; freezeVision?: boolean }): Promise<{ accuracy: number[]; loss: number[] }> {
  const accuracy: number[] = [];
  const loss: number[] = [];
  await trainOnSamples(
    probe.model,
    samples,
    {
      seed: opts.seed ?? 0,
      optim: { lr: opts.lr, weight_decay: 0, grad_clip: 1.0, warmup_steps: 0, schedule: "constant" },
      train: { epochs: 1_000_000, batch_size: opts.batchSize, micro_batch_size: opts.batchSize, max_steps: opts.steps, save_every_epoch: false, freeze_vision_tower: opts.freezeVision ?? false, label_smoothing: 0, stop_below_loss: 0 },
    },
    (e) => {
      if (e.type === "step") {
        accuracy.push(e.tokenAccuracy);
        loss.push(e.loss);
      }
    },
  );
  return { accuracy, loss };
}
