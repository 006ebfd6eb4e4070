/**
 * The loggers' pieces by hand: W&B's run-file framing (a record split over blocks reads
 * back whole; the checksum is zlib's CRC-32), W&B's JSON for non-finite numbers, the
 * backoff's numbers, the validation table's layout with images, and how trainer.logger
 * and trainer.tensorboard decide TensorBoard.
 */
import { describe, expect, test } from "bun:test";
import { decodePng } from "../../../src/core/png.ts";
import type { RolloutEpisode } from "../../../src/rollout/index.ts";
import { checkTrainConfig, TrainConfig } from "../../../src/training/config.ts";
import { backoffMs } from "../../../src/training/loggers/retry.ts";
import { planLoggers } from "../../../src/training/loggers/settings.ts";
import { tileImages, validationTable } from "../../../src/training/loggers/validation-table.ts";
import { BLOCK, crc32, fileHeader, frame, readRecords } from "../../../src/training/loggers/wandb-records.ts";
import { wandbJson } from "../../../src/training/loggers/wandb.ts";
import * as v from "valibot";

describe("W&B run file", () => {
  test("CRC-32 is zlib's (the check value of '123456789' is cbf43926)", () => {
    expect(crc32(new TextEncoder().encode("123456789")).toString(16)).toBe("cbf43926");
    // continuing a CRC equals one CRC over the concatenation (how the chunk type is folded in)
    expect(crc32(new TextEncoder().encode("6789"), crc32(new TextEncoder().encode("12345")))).toBe(0xcbf43926);
  });

  test("records round-trip, one split across a block boundary into FIRST/MIDDLE/LAST chunks", () => {
    const small = Uint8Array.of(1, 2, 3);
    const big = new Uint8Array(BLOCK * 2 + 100).map((_, i) => i % 251);
    let file = fileHeader();
    for (const r of [small, big, small]) file = Uint8Array.from([...file, ...frame(r, file.length)]);
    const chunks = readRecords(file);
    expect(chunks.length).toBe(3);
    expect([...chunks[0]!]).toEqual([1, 2, 3]);
    expect(chunks[1]!.length).toBe(big.length);
    expect(chunks[1]!.every((b, i) => b === i % 251)).toBe(true);
    // the header is ":W&B", 0xBEE1 little-endian, version 0; the first chunk is FULL (type 1) of length 3
    expect([...file.subarray(0, 7)]).toEqual([0x3a, 0x57, 0x26, 0x42, 0xe1, 0xbe, 0]);
    expect([file[7 + 4], file[7 + 5], file[7 + 6]]).toEqual([3, 0, 1]);
    // the big record starts in the first block as FIRST (type 2)
    expect(file[7 + 7 + 3 + 6]).toBe(2);
    // a flipped byte is caught
    file[20] = file[20]! ^ 0xff;
    expect(() => readRecords(file)).toThrow("checksum");
  });

  test("a chunk never straddles a block: fewer than 7 bytes left are zero padding", () => {
    const position = BLOCK - 5;
    const bytes = frame(Uint8Array.of(9), position);
    expect([...bytes.subarray(0, 5)]).toEqual([0, 0, 0, 0, 0]);
    expect(bytes.length).toBe(5 + 7 + 1);
  });

  test("non-finite numbers are written as W&B writes them, not as null", () => {
    expect(wandbJson({ a: Number.NaN, b: Infinity, c: -Infinity, d: 1.5, s: "NaN" })).toBe('{"a":NaN,"b":Infinity,"c":-Infinity,"d":1.5,"s":"NaN"}');
  });
});

test("backoff: base·2^attempt capped at the ceiling, plus at most 25% jitter", () => {
  const policy = { baseMs: 1000, maxMs: 60_000 };
  expect([0, 1, 2, 3, 10].map((a) => backoffMs(a, policy, () => 0))).toEqual([1000, 2000, 4000, 8000, 60_000]);
  expect(backoffMs(2, policy, () => 1)).toBe(5000);
});

describe("validation table", () => {
  const red = { width: 2, height: 1, data: Uint8Array.of(255, 0, 0, 255, 0, 0) };
  const blue = { width: 1, height: 2, data: Uint8Array.of(0, 0, 255, 0, 0, 255) };

  test("images tile three across in cells as large as the largest, on white", () => {
    const t = tileImages([red, blue])!;
    expect([t.width, t.height]).toEqual([4, 2]);
    const px = (x: number, y: number) => [...t.data.subarray((y * t.width + x) * 3, (y * t.width + x) * 3 + 3)];
    expect(px(0, 0)).toEqual([255, 0, 0]);
    expect(px(1, 1)).toEqual([255, 255, 255]);
    expect(px(2, 1)).toEqual([0, 0, 255]);
    expect(px(3, 0)).toEqual([255, 255, 255]);
    expect(tileImages([red, red, red, red])!.height).toBe(2);
  });

  test("one row per episode up to the limit, an image column with log_image, files named as W&B names them", () => {
    const episode = (seed: number, reply: string): RolloutEpisode =>
      ({
        item: { env: "Sokoban", seed, config: {} },
        rows: [{ success: seed === 1 }],
        record: { initialObservation: { text: "look <image>", images: [red, blue] }, turns: [{ completion: { text: reply }, info: {} }], totalReward: seed, seed },
      }) as unknown as RolloutEpisode;
    const episodes = [episode(1, "Left"), episode(2, "Up"), episode(3, "Down")];
    const tags = new Map(episodes.map((e) => [e, "sokoban"]));
    const { values, files } = validationTable(20, episodes, tags, { rows: 2, images: true });
    const table = values["val/episodes"] as { _type: string; path: string; nrows: number; ncols: number };
    expect(table).toMatchObject({ _type: "table-file", nrows: 2, ncols: 9 });
    expect(table.path).toMatch(/^media\/table\/val\/episodes_20_[0-9a-f]{8}\.table\.json$/);
    const json = JSON.parse(new TextDecoder().decode(files.find((f) => f.name === table.path)!.bytes)) as { columns: string[]; data: unknown[][] };
    expect(json.columns).toEqual(["step", "env", "seed", "success", "reward", "turns", "input", "output", "image"]);
    expect(json.data[0]!.slice(0, 8)).toEqual([20, "sokoban", 1, true, 1, 1, "look <image>", "Left"]);
    const image = json.data[1]![8] as { _type: string; path: string; width: number; height: number };
    expect(image).toMatchObject({ _type: "image-file", width: 4, height: 2 });
    const png = decodePng(files.find((f) => f.name === image.path)!.bytes);
    expect([png.width, png.height]).toEqual([4, 2]);
    expect(values["val/sample_image"]).toEqual(json.data[0]![8]);
    expect(validationTable(20, episodes, tags, { rows: 2, images: false }).files.length).toBe(1);
  });
});

describe("trainer.logger and trainer.tensorboard", () => {
  const config = (trainer: Record<string, unknown>) =>
    checkTrainConfig(v.parse(TrainConfig, { model: { model_dir: "m" }, data: { train_batch_size: 1, train: { a: { name: "X", n_envs: 1, max_turns: 1, response_length_per_turn: 1 } } }, actor: { ppo_mini_batch_size: 1 }, critic: { ppo_mini_batch_size: 1 }, trainer: { output_dir: "/tmp/run", ...trainer } }));
  const tb = (trainer: Record<string, unknown>) => planLoggers(config(trainer), {}).tensorboard;

  test("the boolean decides when set; otherwise the list does (default: console and tensorboard)", () => {
    expect(tb({})).toBe(true);
    expect(tb({ logger: ["console"] })).toBe(false);
    expect(tb({ logger: ["console"], tensorboard: true })).toBe(true);
    expect(tb({ logger: ["console", "tensorboard"], tensorboard: false })).toBe(false);
  });

  test("WANDB_MODE=disabled turns W&B off without a key; the run name defaults to the output folder", () => {
    expect(planLoggers(config({ logger: ["wandb"] }), { WANDB_MODE: "disabled" }).wandb).toBeUndefined();
    const plan = planLoggers(config({ logger: ["wandb"] }), { WANDB_MODE: "offline", WANDB_ENTITY: "lab" });
    expect(plan.wandb).toMatchObject({ mode: "offline", project: "vagen", entity: "lab", name: "run" });
    expect(() => planLoggers(config({ logger: ["wandb"] }), { WANDB_MODE: "sideways" })).toThrow("expected online, offline or disabled");
  });
});
