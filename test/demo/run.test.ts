/**
 * `runDemo` end to end with a recipe cut to seconds (the real one takes minutes): base
 * policy, supervised warm start on the mixed demonstrations, GiGPO steps, validation
 * before and after, and a run directory the other commands read. Whether the recipe
 * learns is measured in docs/demo.md, not here; this checks the pipeline holds together.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDemo, type DemoEvent } from "../../src/demo/demo.ts";
import { CPU_RECIPE } from "../../src/demo/recipe.ts";
import * as torch from "../../src/torch/index.ts";

const root = mkdtempSync(join(tmpdir(), "vagen-demo-run-"));
const threadsBefore = torch.torchInfo().threads;
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  torch.setNumThreads(threadsBefore);
});

test(
  "a cut-down demo runs every phase and leaves a run directory with both validations",
  async () => {
    const events: DemoEvent[] = [];
    const runDir = join(root, "run");
    const summary = await runDemo(
      {
        env: "frozenlake",
        render: "vision",
        seed: 0,
        device: "cpu",
        algorithm: "gigpo",
        runDir,
        recipe: { sftEpisodes: 24, sftCarelessProb: 0.5, sftEpochs: 1, rlSteps: 2, rlBatch: 2, rlGroup: 4, valEpisodes: 4 },
      },
      (e) => events.push(e),
    );
    expect(summary.rl_steps).toBe(2);
    expect(summary.algorithm).toBe("gigpo");
    expect(summary.run_dir).toBe(runDir);
    for (const rate of [summary.sft_success_rate, summary.final_success_rate]) {
      expect(rate).toBeGreaterThanOrEqual(0);
      expect(rate).toBeLessThanOrEqual(1);
    }
    expect(events.filter((e) => e.type === "phase").map((e) => (e as { phase: string }).phase)).toEqual(["base", "sft", "rl", "done"]);
    const sftLine = events.find((e) => e.type === "phase" && e.phase === "sft") as { message: string };
    // The recipe here asks for careless demonstrations too (the CPU recipe has none).
    expect(sftLine.message).toContain("50% of them by a careless solver");
    // The warm start and the base policy are model directories; the run is the trainer's.
    for (const dir of ["base", join("sft", "final")]) expect(existsSync(join(runDir, dir, "model.safetensors"))).toBe(true);
    const metrics = readFileSync(join(runDir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
    const validations = metrics.filter((m) => "val/frozenlake/success_rate" in m);
    expect(validations.map((m) => m.step)).toEqual([0, 1, 2]);
    expect(validations[0]!["val/frozenlake/success_rate"]).toBe(summary.sft_success_rate);
    expect(validations.at(-1)!["val/frozenlake/success_rate"]).toBe(summary.final_success_rate);
    // GiGPO ran on engine log-probs with the env's state keys (no old-log-prob forward).
    const stepMetrics = metrics.filter((m) => "actor/pg_loss" in m);
    expect(stepMetrics).toHaveLength(2);
    expect(stepMetrics.every((m) => !("timing_s/old_log_prob" in m))).toBe(true);
    expect(torch.torchInfo().threads).toBe(CPU_RECIPE.cpuThreads!);
  },
  120_000,
);

test(
  "a warm start ended by its probe: greedy success on the probe's own levels, looked at from sftProbeFrom every sftProbeEvery steps",
  async () => {
    const cut = { sftEpisodes: 48, sftCarelessProb: 0.5, sftEpochs: 1, rlSteps: 1, rlBatch: 2, rlGroup: 2, valEpisodes: 2, sftProbeFrom: 1, sftProbeEvery: 1, sftProbeEpisodes: 3 };
    const run = async (name: string, target: number) => {
      const events: DemoEvent[] = [];
      const runDir = join(root, name);
      const summary = await runDemo({ env: "frozenlake", render: "vision", seed: 0, device: "cpu", algorithm: "gigpo", runDir, recipe: { ...cut, sftStopAtSuccess: target } }, (e) => events.push(e));
      const probes = events.flatMap((e) => (e.type === "probe" ? [e] : []));
      const steps = events.flatMap((e) => (e.type === "sft" && e.event.type === "step" ? [e.event.step] : []));
      return { runDir, summary, probes, steps };
    };

    // A success no policy reaches: a probe after every step but the last, each trimmed to its summary.
    const never = await run("probe-never", 1.01);
    expect(never.steps.length).toBeGreaterThan(2);
    expect(never.probes.map((p) => p.step)).toEqual(never.steps.slice(0, -1));
    for (const probe of never.probes) {
      expect(probe).toMatchObject({ episodes: 3, target: 1.01 });
      const dir = join(never.runDir, "sft", "probes", `step_${probe.step}`);
      const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as { envs: Record<string, { episodes: number; success_rate: number }> };
      expect(summary.envs.frozenlake).toMatchObject({ episodes: 3, success_rate: probe.successRate });
      expect(readdirSync(dir)).not.toContain("frozenlake");
    }

    // Any success at all: the warm start ends at the first probe, which keeps its episodes.
    const first = await run("probe-first", 0);
    expect(first.steps).toEqual([1]);
    expect(first.probes.map((p) => p.step)).toEqual([1]);
    expect(readdirSync(join(first.runDir, "sft", "probes", "step_1", "frozenlake"))).toHaveLength(3);
    expect(first.summary.rl_steps).toBe(1);
  },
  120_000,
);

test(
  "Ctrl-C during the warm start ends it after the step in progress: no RL phase, exit code 130, the warm start kept",
  async () => {
    const controller = new AbortController();
    const runDir = join(root, "interrupted");
    const phases: string[] = [];
    const run = runDemo(
      { env: "frozenlake", render: "vision", seed: 0, device: "cpu", algorithm: "gigpo", runDir, signal: controller.signal, recipe: { sftEpisodes: 48, sftEpochs: 2, rlSteps: 1, rlBatch: 2, rlGroup: 2, valEpisodes: 2 } },
      (e) => {
        if (e.type === "phase") phases.push(e.phase);
        if (e.type === "sft" && e.event.type === "step" && e.event.step === 2) controller.abort();
      },
    );
    await expect(run).rejects.toMatchObject({ exitCode: 130, message: expect.stringContaining("after supervised step 2") });
    expect(phases).toEqual(["base", "sft"]);
    expect(existsSync(join(runDir, "sft", "final", "model.safetensors"))).toBe(true);
    expect(existsSync(join(runDir, "metrics.jsonl"))).toBe(false);
  },
  120_000,
);
