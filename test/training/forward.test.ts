/**
 * Rows from engine rollouts through the training forward (tiny Qwen2.5-VL fixture, CPU,
 * f32, images in every prompt): packed into one batch, concat and no_concat rows of
 * different lengths together (left/right padding), `policyForward` gives back the
 * engine's sampling log-probs at every sampled token, and the packing puts each row's
 * prompt and response where verl's layout says.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { EngineClient } from "../../src/clients/engine-client.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { concatHarness } from "../../src/harness/concat.ts";
import { noConcatHarness } from "../../src/harness/no-concat.ts";
import { collectRollouts, type RolloutItem } from "../../src/rollout/collect.ts";
import type { TrainingRow } from "../../src/rollout/types.ts";
import * as torch from "../../src/torch/index.ts";
import { TrainingModel, packRows, policyForward, rowsTensor } from "../../src/training/forward.ts";
import { FIXTURE_DIR, fixtureImage } from "../models/fixture.ts";
import { ScriptedEnv } from "../rollout/scripted.ts";

let loaded: LoadedEngine;
let model: TrainingModel;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
  // The trainer's view of the very family the engine generates with.
  model = new TrainingModel(loaded.model);
});
afterAll(async () => {
  await loaded.close();
});

const imageA = fixtureImage("a");
const imageB = fixtureImage("b");
const imageC = fixtureImage("c");

function createEnv(item: RolloutItem) {
  const first = item.seed === 0 ? imageB : imageA;
  return Promise.resolve(
    new ScriptedEnv({ text: "<image>Go left or right?", images: [first] }, [
      { obs: { text: "Now <image>?", images: [imageC] }, reward: 0.5, done: false },
      { obs: { text: "done", images: [] }, reward: 1, done: true },
    ]),
  );
}

async function rollout(harness: typeof concatHarness): Promise<TrainingRow[]> {
  const client = new EngineClient(loaded.engine, loaded.builder, { defaults: { ignoreStopTokens: true }, codec: loaded.model.conversationCodec() });
  const items = [
    { env: "scripted", seed: 0 },
    { env: "scripted", seed: 1 },
  ];
  const batch = await collectRollouts({ client, items, n: 1, harness: harness(), sampling: { temperature: 1, maxTokens: 3 }, maxTurns: 2, seed: 9, createEnv });
  return batch.rows;
}

/** A [B, W] tensor as rows of numbers. */
function matrix(t: torch.Tensor): number[][] {
  const [B, W] = t.shape as [number, number];
  const flat = t.toFloat64Array();
  return Array.from({ length: B }, (_, b) => Array.from(flat.subarray(b * W, (b + 1) * W)));
}

describe("the training forward over rollout rows", () => {
  test("policyForward gives back the engine's log-probs at every sampled token (concat and no_concat rows in one batch)", async () => {
    const rows = [...(await rollout(concatHarness)), ...(await rollout(noConcatHarness))];
    const live = torch.liveTensors();
    expect(rows.map((r) => r.turnIndex)).toEqual([0, 0, 0, 1, 0, 1]); // 2 concat episodes, then 2 no_concat episodes of 2 calls
    expect(new Set(rows.map((r) => r.promptIds.length + r.responseIds.length)).size).toBeGreaterThan(1); // padding is exercised
    expect(rows.every((r) => r.images.length > 0)).toBe(true);

    const logProbs = torch.noGrad(() => torch.tidy(() => matrix(policyForward(model, rows, { temperature: 1, chunkTokens: 7, withEntropy: false }).logProbs)));
    let compared = 0;
    rows.forEach((row, b) => {
      row.responseMask.forEach((m, j) => {
        if (m !== 1) return;
        expect(Math.abs(logProbs[b]![j]! - row.rolloutLogprobs[j]!)).toBeLessThan(1e-4);
        compared++;
      });
    });
    expect(compared).toBe(2 * 6 + 4 * 3); // every sampled token
    expect(torch.liveTensors()).toBe(live); // the forward freed everything
  }, 60_000);

  test("packing: prompts left-padded to P, responses right-padded to R, the mask 1 at real tokens", async () => {
    const rows = await rollout(noConcatHarness);
    const packed = packRows(rows, 0);
    const { promptWidth: P, responseWidth: R } = packed;
    expect(P).toBe(Math.max(...rows.map((r) => r.promptIds.length)));
    expect(R).toBe(5); // 3 sampled ids (no end-of-turn among them) + the whole closing, <|im_end|> and a newline
    expect(packed.padded).toBe(true);
    rows.forEach((row, b) => {
      const lead = P - row.promptIds.length;
      expect(packed.inputIds[b]!.slice(lead, P)).toEqual(row.promptIds);
      expect(packed.inputIds[b]!.slice(P, P + row.responseIds.length)).toEqual(row.responseIds);
      expect(packed.attentionMask[b]!).toEqual([...new Array<number>(lead).fill(0), ...new Array<number>(P + row.responseIds.length - lead).fill(1), ...new Array<number>(R - row.responseIds.length).fill(0)]);
    });
    // The row columns the trainer builds beside the forward line up with its response positions.
    const columns = (c: readonly number[][]) => torch.tidy(() => matrix(rowsTensor(c, R, { device: "cpu" })));
    expect(columns(rows.map((r) => r.responseMask))).toEqual(rows.map(() => [1, 1, 1, 0, 0]));
    expect(columns(rows.map((r) => r.tokenRewards))).toEqual([[0, 0, 0.5, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0.5, 0, 0], [0, 0, 1, 0, 0]]);
    // One row alone needs no padding, so the forward gets no mask.
    expect(packRows(rows.slice(0, 1), 0).padded).toBe(false);
  }, 60_000);
});
