/**
 * The family's training forward (tiny fixture, CPU, f32): the hidden states of a padded
 * batch of text and image rows equal each row's own forward, and images given to the
 * wrong row are refused before anything runs.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { readPng } from "../../src/models/image-io.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import * as torch from "../../src/torch/index.ts";
import { FIXTURE_DIR, maxRelativeError, refsJson } from "./fixture.ts";

const refs = refsJson();
const ids = (name: string) => [...refs.cases[name]!.input_ids!];
const images = (name: string) => (refs.cases[name]!.image_keys ?? []).map((k) => readPng(join(FIXTURE_DIR, refs.images[k]!.file)));
let family: Qwen25VLChatModel;

beforeAll(() => {
  family = Qwen25VLChatModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
});
afterAll(() => family.dispose());

/** The last position's hidden state of one unpadded row. */
function lastHidden(name: string): Float64Array {
  return torch.tidy(() => {
    const row = ids(name);
    const h = family.forwardForTraining({ inputIds: [row], images: [images(name)] });
    return Float64Array.from(h.narrow(1, row.length - 1, 1).toFloat32Array());
  });
}

test("a left-padded batch of text and image rows gives each row's own hidden states", () => {
  const names = ["text", "two_images", "one_image"];
  const rows = names.map(ids);
  const T = Math.max(...rows.map((r) => r.length));
  const pad = family.eosTokenIds[0]!;
  const inputIds = rows.map((r) => [...new Array<number>(T - r.length).fill(pad), ...r]);
  const attentionMask = rows.map((r) => [...new Array<number>(T - r.length).fill(0), ...new Array<number>(r.length).fill(1)]);
  const last = torch.tidy(() => {
    const h = family.forwardForTraining({ inputIds, attentionMask, images: names.map(images) });
    expect(h.shape).toEqual([names.length, T, family.spec.hiddenSize]);
    return names.map((_, b) => Float64Array.from(h.select(0, b).narrow(0, T - 1, 1).toFloat32Array()));
  });
  names.forEach((name, b) => expect(maxRelativeError(last[b]!, lastHidden(name))).toBeLessThan(1e-5));
});

test("images given to the wrong row, or a row count that does not match, are refused", () => {
  const rows = [ids("one_image"), ids("text")];
  const T = Math.max(...rows.map((r) => r.length));
  const inputIds = rows.map((r) => [...r, ...new Array<number>(T - r.length).fill(0)]);
  const attentionMask = rows.map((r) => [...new Array<number>(r.length).fill(1), ...new Array<number>(T - r.length).fill(0)]);
  expect(() => family.forwardForTraining({ inputIds, attentionMask, images: [[], images("one_image")] })).toThrow(/training batch row 0: \d+ image token\(s\), but its 0 image\(s\) make 0/);
  expect(() => family.forwardForTraining({ inputIds, attentionMask, images: [images("one_image")] })).toThrow("training batch: 2 rows of ids but 1 rows of images");
});
