/**
 * The trainer's dumps (src/training/outputs.ts) on their own: dropped episodes written
 * with their reason and the env's error, the per-reason summary a failed step reports,
 * and write failures that name the path.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OutputWriteError } from "../../src/evaluation/write-error.ts";
import type { EpisodeRecord } from "../../src/harness/types.ts";
import type { DropReason, RolloutEpisode } from "../../src/rollout/index.ts";
import { droppedSummary, dumpBatch, dumpEpisodes, formatDropped, MetricsLog, TRAIN_WRITE_HINT, type DumpedEpisodeMetrics } from "../../src/training/outputs.ts";
import { tempDir } from "../eval/helpers.ts";
import { handRow } from "./rows.ts";

let dir: { path: string; cleanup: () => void } | undefined;
afterEach(() => {
  dir?.cleanup();
  dir = undefined;
});

function record(seed: number, finishReason: EpisodeRecord["finishReason"], error?: EpisodeRecord["error"]): EpisodeRecord {
  return {
    harness: "concat",
    rowPerTurn: false,
    seed,
    systemPrompt: { text: "be good", images: [] },
    initialObservation: { text: "start", images: [] },
    resetInfo: {},
    turns: [],
    finishReason,
    totalReward: 0,
    ...(error ? { error } : {}),
  };
}

function episode(seed: number, finishReason: EpisodeRecord["finishReason"], dropped?: DropReason, error?: string): RolloutEpisode {
  const kind = finishReason === "model_error" ? "model_error" : "env_error";
  return {
    item: { env: "Lake", config: { size: 4 }, seed },
    itemIndex: seed,
    uid: `u${seed}`,
    episodeId: `e${seed}`,
    trajIndex: 0,
    record: record(seed, finishReason, error === undefined ? undefined : { kind, message: error }),
    rows: [],
    ...(dropped ? { dropped } : {}),
  };
}

/** A step of four: a kept one, two env errors with different messages, one too long for the context. */
const STEP = [
  episode(1, "done"),
  episode(2, "env_error", "env_error", "env server http://127.0.0.1:9/step: connection refused"),
  episode(3, "env_error", "env_error", "env server http://127.0.0.1:9/step: HTTP 502"),
  episode(4, "unusable", "context_too_large"),
];

function ctx(episodes: readonly RolloutEpisode[]) {
  return { tags: new Map(episodes.map((e) => [e, "lake"])), model: "/models/tiny", maxTurns: () => 3 };
}

function readDump(folder: string): DumpedEpisodeMetrics {
  return JSON.parse(readFileSync(join(folder, "metrics.json"), "utf8"));
}

describe("dumping a step's episodes", () => {
  test("the first N, kept or dropped; a dropped one carries its reason and the env's message", () => {
    dir = tempDir("vagen-dump-");
    dumpEpisodes(dir.path, STEP, 2, ctx(STEP));
    expect(readdirSync(dir.path).sort()).toEqual(["000_lake_seed1_traj0", "001_lake_seed2_traj0"]);
    expect(readDump(join(dir.path, "000_lake_seed1_traj0")).dropped).toBeUndefined();
    const dropped = readDump(join(dir.path, "001_lake_seed2_traj0"));
    expect(dropped).toMatchObject({
      dropped: "env_error",
      finish_reason: "env_error",
      error: { kind: "env_error", message: "env server http://127.0.0.1:9/step: connection refused" },
      env_name: "Lake",
      tag: "lake",
      seed: 2,
      max_turns: 3,
    });
  });

  test("select dropped: the first N dropped episodes, named by their index in the step", () => {
    dir = tempDir("vagen-dump-");
    dumpEpisodes(dir.path, STEP, 2, ctx(STEP), "dropped");
    expect(readdirSync(dir.path).sort()).toEqual(["001_lake_seed2_traj0", "002_lake_seed3_traj0"]);
    expect(readDump(join(dir.path, "002_lake_seed3_traj0")).error!.message).toBe("env server http://127.0.0.1:9/step: HTTP 502");
    dumpEpisodes(join(dir.path, "all"), STEP, 10, ctx(STEP), "dropped");
    expect(readDump(join(dir.path, "all", "003_lake_seed4_traj0"))).toMatchObject({ dropped: "context_too_large", finish_reason: "unusable" });
    expect(readDump(join(dir.path, "all", "003_lake_seed4_traj0")).error).toBeUndefined();
  });
});

describe("droppedSummary", () => {
  test("counts per reason and the first message of each", () => {
    const summary = droppedSummary(STEP);
    expect(summary).toEqual({
      counts: { env_error: 2, context_too_large: 1 },
      firstErrors: { env_error: "env server http://127.0.0.1:9/step: connection refused" },
    });
    expect(formatDropped(summary)).toBe("env_error: 2 (first: env server http://127.0.0.1:9/step: connection refused), context_too_large: 1");
    expect(formatDropped(summary, 10)).toBe("env_error: 2 (first: env server...), context_too_large: 1");
    expect(droppedSummary([episode(1, "done")])).toEqual({ counts: {}, firstErrors: {} });
  });

  test("an error message with a secret in it is redacted in the one-line form", () => {
    const leaky = [episode(1, "model_error", "model_error", "401 from http://user:hunter2pass@api.example/v1")];
    expect(formatDropped(droppedSummary(leaky))).toBe("model_error: 1 (first: 401 from http://[redacted]@api.example/v1)");
  });
});

describe("trainer writes that fail name the path and trainer.output_dir", () => {
  /** A regular file where the run's folder should be. */
  function blocked(): string {
    dir = tempDir("vagen-dump-");
    const file = join(dir.path, "run");
    writeFileSync(file, "x");
    return file;
  }

  function thrown(write: () => void): OutputWriteError {
    try {
      write();
    } catch (err) {
      expect(err).toBeInstanceOf(OutputWriteError);
      return err as OutputWriteError;
    }
    throw new Error("expected the write to fail");
  }

  test("rollouts/step_N", () => {
    const target = join(blocked(), "rollouts", "step_3");
    const error = thrown(() => dumpEpisodes(target, STEP, 1, ctx(STEP)));
    expect(error.message).toStartWith(`could not write ${join(target, "000_lake_seed1_traj0")}: ENOTDIR not a directory`);
    expect(error.hint).toBe(TRAIN_WRITE_HINT);
    expect(TRAIN_WRITE_HINT).toContain("trainer.output_dir");
  });

  test("batches/step_N.jsonl", () => {
    const target = join(blocked(), "batches");
    const rows = [handRow({ uid: "a", prompt: [1], response: [2] })];
    const cols = { tokenRewards: [[0]], oldLogprobs: [[0]], advantages: [[0]], returns: [[0]] };
    const error = thrown(() => dumpBatch(target, 3, {}, rows, cols));
    expect(error.message).toStartWith(`could not write ${target}: ENOTDIR`);
    expect(error.hint).toBe(TRAIN_WRITE_HINT);
  });

  test("metrics.jsonl", () => {
    const run = blocked();
    const error = thrown(() => new MetricsLog(run, undefined));
    expect(error.message).toStartWith(`could not write ${join(run, "metrics.jsonl")}: ENOTDIR`);
  });
});
