/**
 * `train.label_smoothing`: the supervised loss per trained token is (1 - e) NLL + e times
 * the mean over the vocabulary of -log p (PyTorch's label_smoothing): checked by hand on
 * two rows of logits, then on the probe policy (the loss is affine in e, and e = 0 is the
 * plain NLL); and the config bounds it.
 */
import { afterAll, expect, test } from "bun:test";
import * as v from "valibot";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { SftTrainConfig } from "../../src/sft/config.ts";
import { batchLoss } from "../../src/sft/loss.ts";
import * as torch from "../../src/torch/index.ts";
import { makeProbe, solidImage } from "../demo/image-probe.ts";

const SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 32, textLayers: 1, textHeads: 2, textKvHeads: 1, textIntermediate: 64, visionHidden: 16, visionDepth: 1, visionHeads: 1, visionIntermediate: 32 };
const probe = makeProbe(["R", "B"], SPEC);
afterAll(() => probe.dispose());

test("by hand: logits [0, 1, 2] with target 2, and [0, 0, ln 2] with target 0, e = 0.1, summed", () => {
  // Row 1: log Z = ln(1 + e + e^2); row 2: log Z = ln(1 + 1 + 2) = ln 4.
  const z1 = Math.log(1 + Math.E + Math.E ** 2);
  const nll = z1 - 2 + Math.log(4);
  const uniform = z1 - 1 + (Math.log(4) - Math.log(2) / 3);
  const expected = 0.9 * nll + 0.1 * uniform;
  const got = torch.tidy(() =>
    torch.F.crossEntropy(torch.tensor([0, 1, 2, 0, 0, Math.log(2)], [2, 3]), torch.tensor([2, 0], [2], { dtype: "i64" }), { reduction: "sum", labelSmoothing: 0.1 }).item(),
  );
  expect(got).toBeCloseTo(expected, 5);
});

test("batchLoss: e = 0 is the plain NLL, and the loss is affine in e as the formula says", () => {
  const samples = probe.samples([
    { image: solidImage(56, [230, 20, 20]), answer: "R" },
    { image: solidImage(56, [20, 20, 230]), answer: "B" },
  ]);
  const loss = (e?: number) => torch.noGrad(() => torch.tidy(() => batchLoss(probe.model, samples, e === undefined ? {} : { labelSmoothing: e }).lossSum.item()));
  const nll = loss(undefined);
  expect(loss(0)).toBe(nll);
  // L(e) = (1 - e) NLL + e U: U from e = 0.5, then the other points must fall on the line.
  const uniform = 2 * loss(0.5) - nll;
  expect(uniform).not.toBeCloseTo(nll, 2);
  for (const e of [0.1, 0.3]) expect(loss(e)).toBeCloseTo((1 - e) * nll + e * uniform, 3);
});

test("the config takes 0 to 0.5 and names the key otherwise", () => {
  expect(v.parse(SftTrainConfig, {}).label_smoothing).toBe(0);
  expect(v.parse(SftTrainConfig, { label_smoothing: 0.1 }).label_smoothing).toBe(0.1);
  expect(() => v.parse(SftTrainConfig, { label_smoothing: 0.9 })).toThrow(/label_smoothing <= 0.5/);
});
