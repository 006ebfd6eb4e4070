/**
 * The supervised training forward reads each row's own image: a small demo-shaped
 * policy, trained on one-turn samples [image] -> one-token answer, learns answers that
 * only the image decides. A solid red image answers "R" and a blue one "B" (every row of
 * a batch must see its own pixels for the argmax to get both right); and the padded
 * batch's loss is the sum of each row's own loss (right padding shifts nothing).
 *
 * Then where: a 3x3 board with one lit cell answers the cell's index. Every board holds the
 * same tokens (one lit, eight dark), so only where the lit token sits tells them apart,
 * and nothing in Qwen2.5-VL marks a merged image token's place but rotary attention (2D
 * RoPE in the vision tower, M-RoPE's height and width sections in the decoder). Width
 * takes a head's lowest frequencies, so the decoder's rotary base decides how far apart
 * two columns are: with base 2 (16-dim heads: 0.55-0.65 rad per cell) this is learned in
 * ~50 steps; with base 10 (0.13-0.24 rad) accuracy was 0.67 after 60 (loss 0.68;
 * docs/demo.md has the 4x4 version and base 1000).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { batchLoss } from "../../src/sft/loss.ts";
import * as torch from "../../src/torch/index.ts";
import { litCellImage, makeProbe, solidImage, train, type Probe } from "./image-probe.ts";

/** ~90k parameters: the demo's architecture, narrower, so a step takes a fraction of a second. */
const SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, ropeTheta: 2, textHidden: 64, textLayers: 2, textHeads: 4, textKvHeads: 2, textIntermediate: 128, visionHidden: 32, visionDepth: 2, visionHeads: 2, visionIntermediate: 64 };

let probe: Probe;
beforeAll(() => {
  probe = makeProbe(["R", "B"], SPEC);
});
afterAll(() => probe.dispose());

const red = solidImage(56, [230, 20, 20]);
const blue = solidImage(56, [20, 20, 230]);

test("a padded batch's supervised loss is the sum of its rows' own losses", () => {
  // Rows of different lengths: one image of 2x2 merged tokens, one of 4x4.
  const samples = probe.samples([
    { image: red, answer: "R" },
    { image: litCellImage(4, 28, 5), answer: "B" },
  ]);
  expect(samples[0]!.tokenIds.length).not.toBe(samples[1]!.tokenIds.length);
  const lossOf = (rows: typeof samples) => torch.tidy(() => batchLoss(probe.model, rows).lossSum.item());
  const together = lossOf(samples);
  const apart = lossOf([samples[0]!]) + lossOf([samples[1]!]);
  expect(Math.abs(together - apart) / apart).toBeLessThan(1e-5);
});

test(
  "red answers R and blue answers B after a few dozen supervised steps",
  async () => {
    const samples = probe.samples([
      { image: red, answer: "R" },
      { image: blue, answer: "B" },
    ]);
    const { accuracy, loss } = await train(probe, samples, { steps: 30, lr: 3e-3, batchSize: 2 });
    // Each sample trains two tokens (the answer and <|im_end|>): a policy blind to the image is right on at most 3 of the 4.
    expect(accuracy.at(-1)).toBe(1);
    expect(loss.at(-1)!).toBeLessThan(0.1);
  },
  60_000,
);

test(
  "the index of the lit cell of a 3x3 board is read from the image",
  async () => {
    const answers = "012345678".split("");
    const board = makeProbe(answers, SPEC);
    try {
      const samples = board.samples(answers.map((answer, cell) => ({ image: litCellImage(3, 28, cell), answer })));
      // Solved by step ~50-62 depending on libtorch's thread count (summation order): 80 leaves room.
      const { accuracy } = await train(board, samples, { steps: 80, lr: 3e-3, batchSize: 9 });
      // A policy blind to the place gets 1 of the 9 answers right (and every <|im_end|>): accuracy 10/18.
      expect(accuracy.at(-1)).toBe(1);
    } finally {
      board.dispose();
    }
  },
  60_000,
);
