/**
 * Environment throughput: resets and steps per second for each built-in env in text and
 * vision mode, in-process (the way rollouts use them).
 *
 *   bun bench/envs.ts [--seconds 1]
 *
 * Steps cycle through a fixed list of well-formed responses; an episode that ends is
 * reset (not counted as a step). Prints a markdown table.
 */
import { createEnv } from "../envs/registry.ts";

const secondsArg = process.argv.indexOf("--seconds");
const budgetMs = 1000 * (secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 1);

interface Case {
  name: string;
  env: string;
  config: Record<string, unknown>;
  responses: string[];
}

const moves = ["Up", "Right", "Down", "Left"];
const cases: Case[] = [];
for (const mode of ["text", "vision"]) {
  cases.push({
    name: `Sokoban 6x6, 1 box, solution [1,5] (${mode})`,
    env: "Sokoban",
    config: { render_mode: mode, min_solution_steps: [1, 5] },
    responses: moves.map((m) => `<perception>o</perception><reasoning>t</reasoning><prediction>p</prediction><answer>${m}</answer>`),
  });
  cases.push({
    name: `Sokoban 8x8, 2 boxes, no filter (${mode})`,
    env: "Sokoban",
    config: { render_mode: mode, dim_room: [8, 8], num_boxes: 2 },
    responses: moves.map((m) => `<perception>o</perception><reasoning>t</reasoning><prediction>p</prediction><answer>${m}</answer>`),
  });
  cases.push({
    name: `FrozenLake 4x4 (${mode})`,
    env: "FrozenLake",
    config: { render_mode: mode },
    responses: moves.map((m) => `<think>t</think><answer>${m}</answer>`),
  });
}

async function measure(c: Case): Promise<{ resets: number; steps: number }> {
  const env = await createEnv(c.env, c.config);
  let seed = 0;
  const start = performance.now();
  let resets = 0;
  while (performance.now() - start < budgetMs) {
    await env.reset(seed++);
    resets++;
  }
  const resetRate = resets / ((performance.now() - start) / 1000);

  await env.reset(seed++);
  let steps = 0;
  let stepTime = 0;
  while (stepTime < budgetMs) {
    const t = performance.now();
    const result = await env.step(c.responses[steps % c.responses.length]!);
    stepTime += performance.now() - t;
    steps++;
    if (result.done) await env.reset(seed++);
  }
  await env.close();
  return { resets: resetRate, steps: steps / (stepTime / 1000) };
}

console.log("| env | resets/s | steps/s |");
console.log("|---|---:|---:|");
for (const c of cases) {
  const { resets, steps } = await measure(c);
  console.log(`| ${c.name} | ${Math.round(resets).toLocaleString("en-US")} | ${Math.round(steps).toLocaleString("en-US")} |`);
}
