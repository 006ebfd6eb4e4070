/**
 * The demo with parts of its recipe replaced, for one seed: how much RL lifts the warm
 * start. `bun bench/demo/lift.ts SEED '{"sftStopBelowLoss": 0.22}' [OUT_DIR] [--env sokoban]
 * [--format answer|free_think|wm] [--algorithm gigpo|grpo|ppo|bi_level] [--render vision|text]
 * [--device cpu|cuda] [--recipe-of cpu|cuda]` prints the demo's summary as JSON, with every
 * validation's success rate (run it on one libtorch thread, two seeds side by side on 2
 * cores). `--recipe-of` starts from that device's recipe whatever the device (the CPU
 * recipe on a GPU, say).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runDemo } from "../../src/demo/demo.ts";
import { demoRecipe, resolveRecipe, type DemoAlgorithm, type DemoRecipe } from "../../src/demo/recipe.ts";
import type { DemoEnv, DemoFormat, DemoRender } from "../../src/demo/task.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    env: { type: "string", default: "frozenlake" },
    format: { type: "string", default: "answer" },
    algorithm: { type: "string", default: "gigpo" },
    render: { type: "string", default: "vision" },
    device: { type: "string", default: "cpu" },
    "recipe-of": { type: "string" },
  },
});
const seed = Number(positionals[0] ?? 0);
// A key set to null unsets the recipe's value (JSON has no undefined): `{"sftStopAtSuccess": null}` runs no probe.
const overrides = Object.fromEntries(Object.entries(JSON.parse(positionals[1] ?? "{}") as Record<string, unknown>).map(([k, x]) => [k, x ?? undefined])) as Partial<DemoRecipe>;
// Another device's recipe, with its format's overrides, then these.
const recipe: Partial<DemoRecipe> = values["recipe-of"] ? resolveRecipe(demoRecipe(values["recipe-of"], values.env as DemoEnv), values.format as DemoFormat, overrides) : overrides;
const runDir = positionals[2] ?? join(mkdtempSync(join(tmpdir(), "vagen-lift-")), "run");
const validations: { step: number; success: number }[] = [];
const started = performance.now();
const summary = await runDemo(
  {
    env: values.env as DemoEnv,
    format: values.format as DemoFormat,
    render: values.render as DemoRender,
    algorithm: values.algorithm as DemoAlgorithm,
    seed,
    device: values.device!,
    runDir,
    recipe,
  },
  (event) => {
    if (event.type === "phase") console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${event.message}`);
    const at = `[${((performance.now() - started) / 1000).toFixed(0)} s]`;
    if (event.type === "sft" && event.event.type === "data") console.error(`${at} sft data: ${event.event.episodes} episodes (success ${event.event.successRate.toFixed(2)}), ${event.event.samples} samples, ${event.event.trainedTokens} trained tokens`);
    if (event.type === "sft" && event.event.type === "step" && event.event.step % 25 === 0) console.error(`${at} sft step ${event.event.step}/${event.event.totalSteps}: loss ${event.event.loss.toFixed(3)}`);
    if (event.type === "probe") console.error(`${at} sft probe after step ${event.step}: ${event.successRate.toFixed(3)} on ${event.episodes} probe levels`);
    if (event.type === "sft" && event.event.type === "finished") console.error(`${at} sft finished after ${event.event.steps} steps`);
    if (event.type === "train" && event.event.type === "metrics" && event.event.step % 10 === 0 && !Object.keys(event.event.metrics).some((k) => k.startsWith("val/"))) {
      const picked = Object.entries(event.event.metrics).filter(([k]) => /success_rate|state_estimation_reward|transition_prediction_reward|timing_s\/step$/.test(k));
      console.error(`${at} rl step ${event.event.step}: ${picked.map(([k, x]) => `${k} ${x.toFixed(3)}`).join(", ")}`);
    }
    if (event.type === "train" && event.event.type === "validation") {
      const rate = Object.entries(event.event.metrics).find(([k]) => k.endsWith("/success_rate"))?.[1] ?? Number.NaN;
      validations.push({ step: event.event.step, success: rate });
      console.error(`[${((performance.now() - started) / 1000).toFixed(0)} s] validation at step ${event.event.step}: ${rate.toFixed(3)}`);
    }
  },
);
console.log(JSON.stringify({ seed, recipe: overrides, recipeOf: values["recipe-of"], ...summary, validations, lift: summary.final_success_rate - summary.sft_success_rate }));
