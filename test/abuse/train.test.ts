/**
 * `vagen train` as a hostile user runs it: a learning rate that diverges, NaN in the
 * starting weights, envs that return NaN or strings as rewards, envs that fail in
 * validation or on every episode, resumes with a changed config or a damaged checkpoint,
 * an output_dir that is a file, a second run on the same folder. None of them may train
 * on silently, save a non-finite state, or report success.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "bun";
import * as torch from "../../src/torch/index.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import type { TrainEvent } from "../../src/training/events.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "../training/digit.yaml");
const FIXTURE = join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny");
const FLAKY = join(import.meta.dir, "flaky-env.ts");

function tmp(name: string): string {
  return mkdtempSync(join(tmpdir(), `vagen-abuse-${name}-`));
}

async function train(dir: string, extra: string[] = [], events: TrainEvent[] = []) {
  return runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=2", ...extra]), { onEvent: (e) => events.push(e) });
}

/** The digit config with every env spec replaced by FlakyEnv with `config`. */
function flaky(train: Record<string, unknown>, val?: Record<string, unknown>): string[] {
  const spec = (split: string, config: Record<string, unknown>) => [`data.${split}.digit.name=${FLAKY}:FlakyEnv`, ...Object.entries(config).map(([k, v]) => `data.${split}.digit.config.${k}=${JSON.stringify(v)}`)];
  return [...spec("train", train), ...(val ? spec("val", val) : [])];
}

function checkpointWeightsFinite(dir: string): boolean[] {
  const root = join(dir, "checkpoints");
  if (!existsSync(root)) return [];
  return readdirSync(root).map((step) => {
    const weights = torch.safetensors.loadSharded(join(root, step, "actor"));
    const ok = [...weights.values()].every((t) => Boolean(torch.tidy(() => t.isfinite().all().item())));
    for (const t of weights.values()) t.dispose();
    return ok;
  });
}

describe("non-finite values", () => {
  test("a diverging learning rate warns, stops after trainer.max_nonfinite_steps, and saves only finite weights", async () => {
    const dir = tmp("lr");
    const events: TrainEvent[] = [];
    await expect(train(dir, ["trainer.total_steps=10", "actor.optim.lr=1e10", "trainer.save_freq=1"], events)).rejects.toThrow(/training diverged: 3 step\(s\) in a row/);
    expect(events.filter((e) => e.type === "warning" && e.code === "nonfinite_update").length).toBe(1);
    expect(events.find((e) => e.type === "run_finished")).toMatchObject({ reason: "failed" });
    const lines = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
    expect(lines.at(-1)!["actor/skipped_steps"]).toBeGreaterThan(0);
    expect(checkpointWeightsFinite(dir).every(Boolean)).toBe(true);
  });

  test("NaN in the starting weights is refused before training, naming the model directory", async () => {
    const model = tmp("nan-model");
    cpSync(FIXTURE, model, { recursive: true });
    const weights = torch.safetensors.load(join(model, "model.safetensors"));
    const name = [...weights.keys()].find((k) => k.endsWith("norm.weight"))!;
    torch.noGrad(() => weights.get(name)!.narrow(0, 0, 1).fill_(Number.NaN));
    torch.safetensors.save(join(model, "model.safetensors"), Object.fromEntries(weights));
    for (const t of weights.values()) t.dispose();
    await expect(train(tmp("nan"), [`model.model_dir=${model}`])).rejects.toThrow(new RegExp(`${model}: weights hold NaN or infinite values \\(${name.replaceAll(".", "\\.")}`));
  });

  for (const [what, reward] of [["NaN", "nan"], ["infinite", "inf"], ["absurdly large", "huge"], ["string", "string"]] as const) {
    test(`an env whose reward is ${what} is refused, naming the env`, async () => {
      await expect(train(tmp(`reward-${reward}`), flaky({ reward }))).rejects.toThrow(/env "digit" \(.*FlakyEnv, seed \d+\) returned the reward .*: expected a finite number/);
    });
  }
});

describe("env outages", () => {
  test("validation episodes that fail are counted, left out of the means, warned about, and never pick best_actor", async () => {
    const dir = tmp("val-outage");
    const events: TrainEvent[] = [];
    await train(dir, ["trainer.total_steps=1", "trainer.test_freq=1", ...flaky({}, { fail_seeds_from: 1008 })], events);
    const validation = events.find((e) => e.type === "validation");
    expect(validation).toMatchObject({ best: false });
    const metrics = (validation as Extract<TrainEvent, { type: "validation" }>).metrics;
    // seeds 1008..1015 fail in step(); a reply the policy made unusable never reaches step()
    expect(metrics["val/digit/failed_episodes"]).toBeGreaterThan(0);
    expect(metrics["val/digit/failed_episodes"]).toBeLessThanOrEqual(8);
    expect(events.some((e) => e.type === "warning" && e.code === "validation_failed_episodes")).toBe(true);
    expect(existsSync(join(dir, "best_actor"))).toBe(false);
  });

  test("episodes that fail in training are dropped and counted by reason in the step's metrics", async () => {
    const dir = tmp("some-dropped");
    // Training seeds are drawn from 0..255; those from 128 on fail in step().
    await train(dir, ["trainer.total_steps=1", ...flaky({ fail_seeds_from: 128 })]);
    const lines = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
    const step = lines.find((l) => "data/dropped_episodes" in l)!;
    expect(step["data/dropped/env_error"]).toBeGreaterThan(0);
    const byReason = Object.entries(step).filter(([k]) => k.startsWith("data/dropped/"));
    expect(byReason.reduce((sum, [, n]) => sum + n, 0)).toBe(step["data/dropped_episodes"]!);
    expect(step["data/dropped_episodes"]).toBeLessThan(32);
  });

  test("a step whose episodes all fail names the env's own error and dumps the episodes", async () => {
    const dir = tmp("all-dropped");
    await expect(train(dir, flaky({ fail_seeds_from: 0 }))).rejects.toThrow(/all 32 episode\(s\) were dropped \(env_error: \d+ \(first: .*FlakyEnv refuses seed/); // a random reply may also be unusable
    const dumped = readdirSync(join(dir, "rollouts", "step_1"));
    expect(dumped.length).toBeGreaterThan(0);
    expect(readFileSync(join(dir, "rollouts", "step_1", dumped[0]!, "metrics.json"), "utf8")).toContain("FlakyEnv refuses seed");
  });
});

describe("resume", () => {
  test("a changed critic setup is refused unless asked; other changed keys are named in a warning", async () => {
    const dir = tmp("resume-change");
    await train(dir, ["trainer.total_steps=1", "algorithm.adv_estimator=default_gae"]);
    await expect(train(dir, ["algorithm.adv_estimator=grpo"])).rejects.toThrow(/was trained with another the critic \(present -> absent\)/);
    const events: TrainEvent[] = [];
    await train(dir, ["algorithm.adv_estimator=default_gae", "actor.optim.lr=0.002"], events);
    const warning = events.find((e) => e.type === "warning" && e.code === "config_changed");
    expect(warning && "message" in warning ? warning.message : "").toContain("actor.optim.lr (0.01 -> 0.002)");
    // every segment's config is kept
    expect(readdirSync(join(dir, "config-history")).sort()).toEqual(["from_step_0.yaml", "from_step_1.yaml"]);
  });

  test("total_steps below the checkpoint's step is an error, not an empty run", async () => {
    const dir = tmp("resume-steps");
    await train(dir, ["trainer.total_steps=2"]);
    await expect(train(dir, ["trainer.total_steps=1"])).rejects.toThrow(/key "trainer.total_steps": got 1, but the checkpoint .* is at step 2/);
  });

  test("a damaged newest checkpoint: resume=auto falls back to the previous one; with none left, an error naming the file", async () => {
    const dir = tmp("resume-damaged");
    await train(dir, ["trainer.save_freq=1", "trainer.keep_checkpoints=2"]);
    writeFileSync(join(dir, "checkpoints", "step_2", "state.json"), '{"step": 2, "data": {"epo');
    const events: TrainEvent[] = [];
    const result = await train(dir, ["trainer.total_steps=3", "trainer.save_freq=1", "trainer.keep_checkpoints=2"], events);
    expect(events.find((e) => e.type === "run_started")).toMatchObject({ startStep: 1 });
    expect(events.some((e) => e.type === "warning" && e.code === "checkpoint_unreadable" && e.message.includes("step_2/state.json: not valid JSON"))).toBe(true);
    expect(result.step).toBe(3);

    const one = tmp("resume-damaged-one");
    await train(one, ["trainer.total_steps=1"]);
    writeFileSync(join(one, "checkpoints", "step_1", "state.json"), JSON.stringify({ step: "one" }));
    await expect(train(one)).rejects.toThrow(/no readable checkpoint/);
    await expect(train(one, [`trainer.resume=${join(one, "checkpoints", "step_1")}`])).rejects.toThrow(/step_1\/state\.json: key "step"/);
  });
});

describe("late errors, caught at startup", () => {
  test("a max_prompt_length shorter than the first prompt is refused before any episode runs", async () => {
    const events: TrainEvent[] = [];
    await expect(train(tmp("prompt"), ["data.max_prompt_length=5"], events)).rejects.toThrow(/key "data.train.digit": the first prompt \(seed \d+\) is \d+ tokens, more than data.max_prompt_length \(5\)/);
    expect(events.some((e) => e.type === "step_started")).toBe(false);
  });
});

describe("the run folder", () => {
  test("an output_dir that is a file is an error naming the key", async () => {
    const file = join(tmp("file"), "run");
    writeFileSync(file, "not a folder");
    await expect(train(file)).rejects.toThrow(/key "trainer.output_dir": .* is a file/);
  });

  test("a second run on a folder in use is refused with the holder's pid", async () => {
    const dir = tmp("locked");
    mkdirSync(dir, { recursive: true });
    const holder = spawn(["sleep", "30"]);
    try {
      writeFileSync(join(dir, ".lock"), JSON.stringify({ pid: holder.pid, host: (await import("node:os")).hostname(), started: new Date().toISOString(), token: "x" }));
      await expect(train(dir)).rejects.toThrow(new RegExp(`another run is using this run folder \\(pid ${holder.pid}`));
      expect(existsSync(join(dir, "metrics.jsonl"))).toBe(false);
    } finally {
      holder.kill();
    }
  });
});
