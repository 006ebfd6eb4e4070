/**
 * Rows from engine rollouts, batched, through a differentiable forward (tiny Qwen2.5-VL
 * fixture, CPU, f32, images in every prompt): the forward over the RowBatch's own pixel
 * values, grids and M-RoPE positions gives back the engine's sampling log-probs at every
 * sampled token, and the family's forwardForTraining over the same padded rows agrees.
 * Concat and no_concat rows of different lengths share one batch (left/right padding).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tokenLogProbs } from "../../src/algorithms/index.ts";
import { EngineClient } from "../../src/clients/engine-client.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { concatHarness } from "../../src/harness/concat.ts";
import { noConcatHarness } from "../../src/harness/no-concat.ts";
import type { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { batchRows, padRows } from "../../src/rollout/batch.ts";
import { collectRollouts, type RolloutItem } from "../../src/rollout/collect.ts";
import { qwen25VLRowFamily } from "../../src/rollout/qwen2_5_vl.ts";
import type { TrainingRow } from "../../src/rollout/types.ts";
import * as torch from "../../src/torch/index.ts";
import type { Tensor } from "../../src/torch/index.ts";
import { FIXTURE_DIR, fixtureImage } from "../models/fixture.ts";
import { ScriptedEnv } from "./scripted.ts";

/** A [B, W] tensor as rows of numbers. */
function matrix(t: Tensor): number[][] {
  const [B, W] = t.shape as [number, number];
  const flat = t.toFloat64Array();
  return Array.from({ length: B }, (_, b) => Array.from(flat.subarray(b * W, (b + 1) * W)));
}

let loaded: LoadedEngine;
let chat: Qwen25VLChatModel;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
  chat = loaded.model as Qwen25VLChatModel;
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
  const client = new EngineClient(loaded.engine, loaded.builder, { defaults: { ignoreStopTokens: true }, codec: chat.conversationCodec() });
  const items = [
    { env: "scripted", seed: 0 },
    { env: "scripted", seed: 1 },
  ];
  const batch = await collectRollouts({ client, items, n: 1, harness: harness(), sampling: { temperature: 1, maxTokens: 3 }, maxTurns: 2, seed: 9, createEnv });
  return batch.rows;
}

/** [B, R] log-probs of the response tokens from the batch's own model inputs. */
function forwardLogProbs(rows: readonly TrainingRow[]): { fromInputs: number[][]; fromFamily: number[][] } {
  const batch = batchRows(rows, qwen25VLRowFamily(chat));
  const hostIds = padRows(rows, chat.padTokenId).inputIds;
  const { promptWidth: P, responseWidth: R } = batch;
  const inputs = batch.modelInputs as { pixelValues: Tensor; imageGridThw: number[][]; positionIds: Tensor; images: never };
  const responseTokens = torch.tensor(
    rows.flatMap((r) => [...r.responseIds, ...new Array<number>(R - r.responseIds.length).fill(0)]),
    [rows.length, R],
    { dtype: "i64" },
  );
  const logProbs = (hidden: Tensor) => tokenLogProbs(chat.logits(hidden.narrow(1, P - 1, R)), responseTokens, { withEntropy: false }).logProbs;
  const out = torch.tidy(() => {
    const model = chat.model;
    const features = model.encodeImages(inputs.pixelValues, inputs.imageGridThw);
    const embeds = model.mergeImageFeatures(hostIds, model.embed(batch.inputIds), features);
    const hidden = model.forward({ inputsEmbeds: embeds, positionIds: inputs.positionIds, attentionMask: batch.attentionMask, mathAttention: true });
    const family = chat.forwardForTraining({ inputIds: hostIds, attentionMask: padRows(rows, chat.padTokenId).attentionMask, images: inputs.images }, { mathAttention: true });
    return { fromInputs: matrix(logProbs(hidden)), fromFamily: matrix(logProbs(family)) };
  });
  responseTokens.dispose();
  batch.dispose();
  return out;
}

describe("batchRows", () => {
  test("a forward over the row batch gives back the engine's log-probs at every sampled token (concat and no_concat rows in one batch)", async () => {
    const rows = [...(await rollout(concatHarness)), ...(await rollout(noConcatHarness))];
    const live = torch.liveTensors();
    expect(rows.map((r) => r.turnIndex)).toEqual([0, 0, 0, 1, 0, 1]); // 2 concat episodes, then 2 no_concat episodes of 2 calls
    expect(new Set(rows.map((r) => r.promptIds.length + r.responseIds.length)).size).toBeGreaterThan(1); // padding is exercised
    expect(rows.every((r) => r.images.length > 0)).toBe(true);

    const { fromInputs, fromFamily } = forwardLogProbs(rows);
    let compared = 0;
    rows.forEach((row, b) => {
      row.responseMask.forEach((m, j) => {
        if (m !== 1) return;
        expect(Math.abs(fromInputs[b]![j]! - row.rolloutLogprobs[j]!)).toBeLessThan(1e-4);
        expect(Math.abs(fromFamily[b]![j]! - fromInputs[b]![j]!)).toBeLessThan(1e-5);
        compared++;
      });
    });
    expect(compared).toBe(2 * 6 + 4 * 3); // every sampled token
    expect(torch.liveTensors()).toBe(live); // the batch and the forward freed everything
  }, 60_000);

  test("the batch's tensors: shapes, padding sides, masks, rewards and log-probs by row", async () => {
    const rows = await rollout(noConcatHarness);
    const batch = batchRows(rows, qwen25VLRowFamily(chat));
    const { promptWidth: P, responseWidth: R } = batch;
    expect(P).toBe(Math.max(...rows.map((r) => r.promptIds.length)));
    expect(R).toBe(5); // 3 sampled ids (no end-of-turn among them) + the whole closing, <|im_end|> and a newline
    const ids = matrix(batch.inputIds);
    const mask = matrix(batch.attentionMask);
    rows.forEach((row, b) => {
      const lead = P - row.promptIds.length;
      expect(ids[b]!.slice(lead, P)).toEqual(row.promptIds);
      expect(ids[b]!.slice(P, P + row.responseIds.length)).toEqual(row.responseIds);
      expect(mask[b]!).toEqual([...new Array<number>(lead).fill(0), ...new Array<number>(P + row.responseIds.length - lead).fill(1), ...new Array<number>(R - row.responseIds.length).fill(0)]);
    });
    expect(matrix(batch.responseMask)).toEqual(rows.map(() => [1, 1, 1, 0, 0]));
    expect(matrix(batch.tokenRewards)).toEqual([[0, 0, 0.5, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0.5, 0, 0], [0, 0, 1, 0, 0]]);
    expect(matrix(batch.rolloutLogprobs).map((r) => r.map((x) => Math.fround(x)))).toEqual(rows.map((r) => r.rolloutLogprobs.map((x) => Math.fround(x))));
    const inputs = batch.modelInputs as { positionIds: Tensor; imageGridThw: number[][] };
    expect(inputs.positionIds.shape).toEqual([3, rows.length, P + R]);
    expect(inputs.imageGridThw).toEqual(rows.flatMap((r) => r.images.map((i) => [...i.grid])));
    batch.dispose();
  }, 60_000);
});
