/**
 * `train.stop_below_loss`: the supervised loop stops after the first step at which the
 * mean loss of the last ten steps is below the limit, says so in an event, and 0 runs
 * every step asked for. Checked against the loss trace of an unstopped run of the same
 * seed (the runs are deterministic, so the stopped one is its prefix).
 */
import { expect, test } from "bun:test";
import * as v from "valibot";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { SftTrainConfig } from "../../src/sft/config.ts";
import { STOP_LOSS_WINDOW, trainOnSamples, type SftEvent } from "../../src/sft/trainer.ts";
import { makeProbe, solidImage } from "../demo/image-probe.ts";

const SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 32, textLayers: 1, textHeads: 2, textKvHeads: 1, textIntermediate: 64, visionHidden: 16, visionDepth: 1, visionHeads: 1, visionIntermediate: 32 };

async function run(stopBelowLoss: number, steps: number): Promise<SftEvent[]> {
  const probe = makeProbe(["R", "B"], SPEC);
  try {
    const samples = probe.samples([
      { image: solidImage(56, [230, 20, 20]), answer: "R" },
      { image: solidImage(56, [20, 20, 230]), answer: "B" },
    ]);
    const events: SftEvent[] = [];
    await trainOnSamples(
      probe.model,
      samples,
      {
        seed: 0,
        optim: { lr: 3e-3, weight_decay: 0, grad_clip: 1.0, warmup_steps: 0, schedule: "constant" },
        train: { epochs: 1_000, batch_size: 2, micro_batch_size: 2, max_steps: steps, save_every_epoch: false, freeze_vision_tower: false, label_smoothing: 0, stop_below_loss: stopBelowLoss },
      },
      (e) => events.push(e),
    );
    return events;
  } finally {
    probe.dispose();
  }
}

const full = await run(0, 40);
const losses = full.flatMap((e) => (e.type === "step" ? [e.loss] : []));

test("0 never stops early: every step asked for runs", () => {
  expect(losses).toHaveLength(40);
  expect(full.some((e) => e.type === "stopped_early")).toBe(false);
  // The loss falls, so a limit between its start and its end is reached on the way.
  expect(losses.at(-1)!).toBeLessThan(losses[0]! / 2);
});

test("stops after the first step whose mean loss over the last ten steps is below the limit", async () => {
  const means = losses.map((_, i) => (i + 1 < STOP_LOSS_WINDOW ? Infinity : losses.slice(i + 1 - STOP_LOSS_WINDOW, i + 1).reduce((a, b) => a + b, 0) / STOP_LOSS_WINDOW));
  // A limit the ten-step mean crosses part of the way through the run.
  const limit = (means[STOP_LOSS_WINDOW - 1]! + means.at(-1)!) / 2;
  const expectedStep = means.findIndex((m) => m < limit) + 1;
  expect(expectedStep).toBeGreaterThan(STOP_LOSS_WINDOW);
  expect(expectedStep).toBeLessThan(40);

  const stopped = await run(limit, 40);
  const steps = stopped.flatMap((e) => (e.type === "step" ? [e.loss] : []));
  expect(steps).toEqual(losses.slice(0, expectedStep));
  const event = stopped.find((e) => e.type === "stopped_early");
  expect(event).toMatchObject({ type: "stopped_early", step: expectedStep, below: limit });
  expect((event as { meanLoss: number }).meanLoss).toBeCloseTo(means[expectedStep - 1]!, 6);
});

test("the config takes 0 and up, 0 by default", () => {
  expect(v.parse(SftTrainConfig, {}).stop_below_loss).toBe(0);
  expect(v.parse(SftTrainConfig, { stop_below_loss: 0.2 }).stop_below_loss).toBe(0.2);
  expect(() => v.parse(SftTrainConfig, { stop_below_loss: -1 })).toThrow();
});
