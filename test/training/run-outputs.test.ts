/**
 * What one run writes: config.yaml, metrics.jsonl with verl's names, TensorBoard events
 * with the same scalars, rollouts/step_N episodes, batches/step_N.jsonl with the
 * estimator's parameters and per-token columns; and the CLI's plain lines and Ctrl-C.
 */
import { describe, expect, test } from "bun:test";
import { spawn } from "bun";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { trainLogRenderer } from "../../src/cli/render/train-lines.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import type { TrainEvent } from "../../src/training/events.ts";
import { MetricsLog } from "../../src/training/outputs.ts";
import { readEventFile } from "../../src/training/tensorboard.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

describe("a run's outputs", () => {
  test("metrics.jsonl: a resumed run keeps the lines up to its checkpoint; a fresh run in the same folder starts the file anew", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-metrics-"));
    const earlier = [0, 1, 2, 3].map((step) => JSON.stringify({ step, "actor/pg_loss": step / 10 })).join("\n") + "\n";
    const steps = () => readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").filter(Boolean).map((l) => (JSON.parse(l) as { step: number }).step);
    writeFileSync(join(dir, "metrics.jsonl"), earlier);
    new MetricsLog(dir, 2).append(3, { "actor/pg_loss": 9 });
    expect(steps()).toEqual([0, 1, 2, 3]);
    writeFileSync(join(dir, "metrics.jsonl"), earlier);
    const fresh = new MetricsLog(dir, undefined);
    expect(steps()).toEqual([]);
    fresh.append(0, { "val/x/success_rate": 0.5 });
    expect(steps()).toEqual([0]);
  });

  test(
    "metrics, TensorBoard, episodes and batch dumps",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "vagen-outputs-"));
      const events: TrainEvent[] = [];
      let text = "";
      const view = trainLogRenderer({ write: (t: string) => (text += t) });
      await runTraining(
        await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=2", "trainer.test_freq=2", "trainer.dump_batches=true", "trainer.log_episodes=2", "trainer.tensorboard=true", "algorithm.adv_estimator=bi_level_gae", "algorithm.gamma_turn=0.9", "data.train.digit.max_turns=3"]),
        { onEvent: (e) => (events.push(e), view(e)) },
      );
      expect(existsSync(join(dir, "config.yaml"))).toBe(true);
      const steps = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
      expect(steps.map((s) => s.step)).toEqual([1, 2]);
      for (const key of ["critic/score/mean", "actor/pg_loss", "actor/entropy", "actor/ppo_kl", "actor/pg_clipfrac", "critic/vf_loss", "response_length/mean", "timing_s/gen", "train/digit/success_rate", "train/digit/mean_reward"]) {
        expect(steps[0]![key]).toBeNumber();
      }
      expect(steps[1]!["val/digit/success_rate"]).toBeNumber();
      // what the engine ran for each step's rollout: every episode's prompts prefilled (the
      // prefill samples a reply's first token), and each decode call a token for at least
      // one sequence, only when some reply is longer than one token
      for (const s of steps) {
        expect(s["perf/engine_prefill_calls"]).toBeGreaterThanOrEqual(1);
        expect(s["perf/engine_prefill_tokens"]).toBeGreaterThan(s["prompt_length/min"]!);
        expect(s["perf/engine_decode_calls"]! > 0).toBe(s["response_length/max"]! > 1);
        expect(s["perf/engine_decode_tokens"]).toBeGreaterThanOrEqual(s["perf/engine_decode_calls"]!);
      }
      // the trainer's forward gives the engine's sampling log-probs back (f32, CPU)
      expect(steps[0]!["rollout/logprob_mismatch"]).toBeLessThan(1e-4);

      const tb = readdirSync(join(dir, "tensorboard"));
      const scalars = readEventFile(join(dir, "tensorboard", tb[0]!)).slice(1);
      expect(scalars.map((e) => e.step)).toEqual([1, 2]);
      expect(scalars[0]!.scalars["actor/pg_loss"]).toBeCloseTo(steps[0]!["actor/pg_loss"]!, 6);

      expect(readdirSync(join(dir, "rollouts", "step_1")).length).toBe(2);
      for (const name of readdirSync(join(dir, "rollouts", "step_1"))) {
        const episodeDir = join(dir, "rollouts", "step_1", name);
        expect(existsSync(join(episodeDir, "transcript.md"))).toBe(true);
        // The configured turn limit, not the turns the episode happened to take (a digit is
        // answered once; an episode whose reply was unusable took none).
        const metrics = JSON.parse(readFileSync(join(episodeDir, "metrics.json"), "utf8")) as { max_turns: number; num_turns: number };
        expect(metrics.max_turns).toBe(3);
        expect(metrics.num_turns).toBeLessThanOrEqual(1);
      }

      const lines = readFileSync(join(dir, "batches", "step_1.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
      expect(lines[0].meta).toMatchObject({ estimator: "bi_level_gae", gamma_turn: 0.9, lambda_turn: 0.95, lambda_token: 1, bi_level_mix: 0.75, gamma: 1, lam: 1, norm_adv_by_std_in_grpo: true });
      expect(lines.length).toBe(1 + steps[0]!["data/rows"]!);
      const row = lines[1];
      for (const key of ["uid", "episode", "traj", "turn", "prompt_ids", "response_ids"]) expect(row[key]).toBeDefined();
      for (const key of ["response_mask", "token_rewards", "values", "old_logprobs", "rollout_logprobs", "advantages", "returns"]) expect(row[key].length).toBe(row.response_ids.length);

      expect(events.filter((e) => e.type === "step_started").length).toBe(2);
      expect(events.at(-1)).toMatchObject({ type: "run_finished", reason: "completed", step: 2 });
      expect(text).toContain("[step 1/2] rollout");
      expect(text).toMatch(/\[step 2\/2\] score [0-9.]+ success digit [0-9.]+ \| pg_loss/);
    },
    { timeout: 300_000 },
  );

  test(
    "exactly on-policy, the engine's log-probs stand in for the trainer's forward",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "vagen-engine-lp-"));
      await runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=1", "rollout.use_engine_logprobs=true", "trainer.dump_batches=true"]));
      const [step] = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
      expect(step!["timing_s/old_log_prob"]).toBeUndefined(); // no old-log-prob forward ran
      expect(Math.abs(step!["actor/ppo_kl"]!)).toBeLessThan(1e-4); // and the update saw itself on-policy
      const row = JSON.parse(readFileSync(join(dir, "batches", "step_1.jsonl"), "utf8").split("\n")[1]!);
      expect(row.old_logprobs).toEqual(row.rollout_logprobs.map((x: number) => Math.fround(x)));
    },
    { timeout: 300_000 },
  );

  for (const [signal, status] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]] as const) {
    test(
      `${signal} stops at the next phase boundary, saves a checkpoint of the last finished step, exits ${status}`,
      async () => {
        const dir = mkdtempSync(join(tmpdir(), "vagen-signal-"));
        const child = spawn(["bun", MAIN, "train", CONFIG, `trainer.output_dir=${dir}`, "trainer.total_steps=50", "trainer.save_freq=0"], {
          stderr: "pipe",
          stdout: "ignore",
          env: { ...process.env, OMP_NUM_THREADS: "2" },
        });
        let log = "";
        const decoder = new TextDecoder();
        let sent = false;
        for await (const chunk of child.stderr) {
          log += decoder.decode(chunk);
          if (!sent && log.includes("[step 2/50] rollout")) {
            child.kill(signal);
            sent = true;
          }
        }
        expect(await child.exited).toBe(status);
        expect(log).toContain(`${signal}: stopping`);
        expect(log).toContain("train: interrupted at step");
        const step = Number(/interrupted at step (\d+)/.exec(log)![1]);
        expect(step).toBeGreaterThanOrEqual(1);
        expect(existsSync(join(dir, "checkpoints", `step_${step}`, "state.json"))).toBe(true);
        expect(existsSync(join(dir, ".lock"))).toBe(false);
      },
      { timeout: 300_000 },
    );
  }
});
