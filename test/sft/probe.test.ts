/**
 * The warm start's probe (`SftProbe`): after step `from` and every `every` steps after
 * it the judge sees the policy as it stands, as a model directory, and the run stops at
 * the first step it says so. Checked against an unprobed run of the same seed (the runs
 * are deterministic, so the stopped one is its prefix), and the judged directory against
 * what the run then saves as final/.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeDemoBaseModel } from "../../src/demo/task.ts";
import type { SftConfig } from "../../src/sft/config.ts";
import { runSft, type SftEvent } from "../../src/sft/trainer.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { ONE_BOARD_TASK, TINY_SPEC, oneBoardSftConfig } from "./one-board.ts";

const root = mkdtempSync(join(tmpdir(), "vagen-sft-probe-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const task = ONE_BOARD_TASK;
const SPEC = TINY_SPEC;
const baseDir = join(root, "base");
await writeDemoBaseModel(baseDir, task, { seed: 0, spec: SPEC });

/** 8 one-turn samples, 4 steps an epoch. */
function config(name: string): SftConfig {
  return oneBoardSftConfig(baseDir, join(root, name), { train: { epochs: 5, batch_size: 2, micro_batch_size: 2 } });
}

const losses = (events: SftEvent[]) => events.flatMap((e) => (e.type === "step" ? [e.loss] : []));
const maxDiff = (a: Map<string, torch.Tensor>, b: Map<string, torch.Tensor>) => Math.max(...[...a].map(([name, t]) => torch.tidy(() => t.sub(b.get(name)!).abs().max().item())));

test("the judge sees the policy after steps from, from + every, ...; the run stops at the first yes, on the unprobed run's path", async () => {
  const full: SftEvent[] = [];
  await runSft(config("full"), (e) => full.push(e));
  expect(losses(full)).toHaveLength(20);

  const judged: { step: number; weights: Map<string, torch.Tensor> }[] = [];
  const events: SftEvent[] = [];
  const result = await runSft(config("probed"), (e) => events.push(e), {
    probe: {
      from: 3,
      every: 4,
      judge: async (modelDir, step) => {
        judged.push({ step, weights: safetensors.load(join(modelDir, "model.safetensors")) });
        return step >= 11;
      },
    },
  });
  try {
    expect(judged.map((j) => j.step)).toEqual([3, 7, 11]);
    expect(events.filter((e) => e.type === "probed")).toEqual([
      { type: "probed", step: 3, stop: false },
      { type: "probed", step: 7, stop: false },
      { type: "probed", step: 11, stop: true },
    ]);
    expect(result.steps).toBe(11);
    expect(losses(events)).toEqual(losses(full).slice(0, 11));
    expect(events.filter((e) => e.type === "step").every((e) => (e as { mayStopEarly: boolean }).mayStopEarly)).toBe(true);

    // What the judge saw last is final/, bit for bit; the earlier looks were of other weights.
    const final = safetensors.load(join(result.modelDir, "model.safetensors"));
    try {
      expect(maxDiff(final, judged[2]!.weights)).toBe(0);
      expect(maxDiff(final, judged[0]!.weights)).toBeGreaterThan(0);
    } finally {
      for (const t of final.values()) t.dispose();
    }
  } finally {
    for (const j of judged) for (const t of j.weights.values()) t.dispose();
  }
});

test("a judge that never says yes leaves the run its every step", async () => {
  const events: SftEvent[] = [];
  const result = await runSft(config("never"), (e) => events.push(e), { probe: { from: 10, every: 5, judge: async () => false } });
  expect(result.steps).toBe(20);
  // Not after the last step: the run ends there anyway.
  expect(events.filter((e) => e.type === "probed").map((e) => (e as { step: number }).step)).toEqual([10, 15]);
});

test("an aborted signal ends the run after the step in progress, which is saved as final/ like a last step", async () => {
  const full: SftEvent[] = [];
  await runSft(config("uninterrupted"), (e) => full.push(e));
  const controller = new AbortController();
  const events: SftEvent[] = [];
  const result = await runSft(
    config("interrupted"),
    (e) => {
      events.push(e);
      if (e.type === "step" && e.step === 6) controller.abort();
    },
    { signal: controller.signal },
  );
  expect(result).toMatchObject({ steps: 6, interrupted: true });
  expect(events.filter((e) => e.type === "interrupted")).toEqual([{ type: "interrupted", step: 6 }]);
  expect(losses(events)).toEqual(losses(full).slice(0, 6));
  const final = safetensors.load(join(result.modelDir, "model.safetensors"));
  const saved = safetensors.load(join(result.checkpoint, "actor", "model.safetensors"));
  try {
    expect(result.checkpoint).toEndWith("step_6");
    expect(maxDiff(final, saved)).toBe(0);
  } finally {
    for (const t of [...final.values(), ...saved.values()]) t.dispose();
  }
  // Not aborted: the whole schedule, and not called interrupted.
  expect((await runSft(config("not-aborted"), () => {}, { signal: new AbortController().signal })).interrupted).toBe(false);
});
