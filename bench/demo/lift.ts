/**
 * The demo with parts of its recipe replaced, for one seed: how much RL lifts the warm
 * start. `bun bench/demo/lift.ts SEED '{"sftStopBelowLoss": 0.22}' [OUT_DIR]` prints the
 * demo's summary as JSON (run it on one libtorch thread, two seeds side by side on 2 cores).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runDemo } from "../../src/demo/demo.ts";
import type { DemoRecipe } from "../../src/demo/recipe.ts";

const seed = Number(process.argv[2] ?? 0);
const recipe = JSON.parse(process.argv[3] ?? "{}") as Partial<DemoRecipe>;
const runDir = process.argv[4] ?? join(mkdtempSync(join(tmpdir(), "vagen-lift-")), "run");
const summary = await runDemo({ env: "frozenlake", render: "vision", algorithm: "gigpo", seed, device: "cpu", runDir, recipe });
console.log(JSON.stringify({ seed, recipe, ...summary, lift: summary.final_success_rate - summary.sft_success_rate }));
