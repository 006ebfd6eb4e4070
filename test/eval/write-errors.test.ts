/**
 * A write of eval outputs that fails names the path it was writing. ENOSPC cannot be
 * produced portably (and a read-only folder does not stop root), so the target sits
 * under a regular file: the same fs failure path, ENOTDIR.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createEnv } from "../../envs/registry.ts";
import { createClient } from "../../src/clients/config.ts";
import { failedEpisodeMetrics } from "../../src/evaluation/episode-metrics.ts";
import { writeEpisode, writeFileAtomic } from "../../src/evaluation/outputs.ts";
import { buildEvalPlan } from "../../src/evaluation/plan.ts";
import { runEvaluation } from "../../src/evaluation/runner.ts";
import { guardWrite, OutputWriteError, writeFailure } from "../../src/evaluation/write-error.ts";
import { solverAnswer } from "./answerers.ts";
import { type FakeServer, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { evalConfig, SOKOBAN_TEXT, tempDir } from "./helpers.ts";

let dir: { path: string; cleanup: () => void } | undefined;
let server: FakeServer | undefined;
afterEach(async () => {
  await server?.stop();
  dir?.cleanup();
  dir = server = undefined;
});

/** A regular file to put paths under. */
function blocker(): string {
  dir = tempDir("vagen-write-");
  const file = join(dir.path, "not-a-dir");
  writeFileSync(file, "x");
  return file;
}

/** What `write` throws, checked to be an `OutputWriteError`. */
function thrown(write: () => void): OutputWriteError {
  try {
    write();
  } catch (err) {
    expect(err).toBeInstanceOf(OutputWriteError);
    return err as OutputWriteError;
  }
  throw new Error("expected the write to fail");
}

const context = { envName: "Sokoban", tag: "sokoban", model: "m", maxTurns: 1, envConfig: {} };

describe("eval output writes that fail", () => {
  test("writeEpisode names the episode folder, the fs code and what to do", () => {
    const target = join(blocker(), "sokoban", "seed_1");
    const { message, hint, path, code } = thrown(() => writeEpisode(target, failedEpisodeMetrics(1, "concat", context, new Error("x"))));
    expect(path).toBe(target);
    expect(code).toBe("ENOTDIR");
    expect(message).toStartWith(`could not write ${target}: ENOTDIR not a directory`);
    expect(hint).toBe("free disk space, or point output_dir somewhere writable");
  });

  test("writeFileAtomic names the file, takes the caller's hint, and leaves no temporary behind", () => {
    dir = tempDir("vagen-write-");
    const folder = join(dir.path, "out");
    mkdirSync(folder);
    // The rename fails: the target is a folder that holds something.
    const target = join(folder, "summary.json");
    mkdirSync(target);
    writeFileSync(join(target, "keep"), "x");
    const error = thrown(() => writeFileAtomic(target, "{}", "free disk space, or change trainer.output_dir"));
    expect(error.message).toStartWith(`could not write ${target}: `);
    expect(error.hint).toBe("free disk space, or change trainer.output_dir");
    expect(readdirSync(folder)).toEqual(["summary.json"]);
  });

  test("only fs errors become write errors; the code is said once", () => {
    expect(() => guardWrite("/x", "h", () => JSON.parse("{"))).toThrow(SyntaxError);
    const fsError = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    expect(writeFailure("/run/rollouts/step_3", fsError, "free disk space").message).toBe("could not write /run/rollouts/step_3: ENOSPC no space left on device, write");
    const wrapped = writeFailure("/a", fsError, "h");
    expect(writeFailure("/b", wrapped, "other")).toBe(wrapped);
  });

  test("a run whose output_dir cannot be made stops before any episode, naming it", async () => {
    const out = join(blocker(), "run");
    server = startFakeOpenAIServer({ answer: solverAnswer });
    const config = evalConfig(out, server.baseUrl, { sokoban: { name: "Sokoban", config: SOKOBAN_TEXT, episodes: 1, max_turns: 2 } });
    await expect(runEvaluation(buildEvalPlan(config), { client: createClient(config.model), createEnv })).rejects.toThrow(`could not write ${out}: ENOTDIR`);
    expect(server.requests.length).toBe(0);
  });

  test("an episode folder that cannot be written stops the run, naming the folder (not recorded as an episode error)", async () => {
    dir = tempDir("vagen-write-");
    const out = join(dir.path, "run");
    mkdirSync(out);
    // The env's tag folder is a regular file: config.yaml is written, the episode is not.
    writeFileSync(join(out, "sokoban"), "x");
    server = startFakeOpenAIServer({ answer: solverAnswer });
    const config = evalConfig(out, server.baseUrl, { sokoban: { name: "Sokoban", config: SOKOBAN_TEXT, episodes: 1, seed_start: 5, max_turns: 2 } });
    // mkdir of the tag folder meets the file: EEXIST.
    await expect(runEvaluation(buildEvalPlan(config), { client: createClient(config.model), createEnv })).rejects.toThrow(
      `could not write ${join(out, "sokoban", "seed_5")}: EEXIST file already exists, mkdir '${join(out, "sokoban")}'`,
    );
    expect(existsSync(join(out, "summary.json"))).toBe(false);
  });
});
