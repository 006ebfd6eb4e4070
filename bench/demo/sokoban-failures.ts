/**
 * How a Sokoban demo policy fails: runs greedy (or sampled) validation episodes of a model
 * directory on the demo's held-out levels (or reads an eval folder already written),
 * replays each episode's moves in the env and sorts every move into
 *   closer    the optimal solution from the new state is shorter
 *   detour    it moved, the level is still solvable, and not closer
 *   bump      into a wall or a box that cannot move (nothing changes)
 *   deadlock  the level became unsolvable (a box pushed where it can never reach a target)
 *   solved    the last box onto its target
 * and every episode by how it ended (solved, deadlocked, stuck: the same state for its last
 * three moves, or out of turns otherwise).
 *
 *   OMP_NUM_THREADS=1 bun bench/demo/sokoban-failures.ts '{"model":"RUN/sft/final","levels":[1,3],"turns":6}'
 *
 * Options (JSON): model, evalDir, episodes (128), levels ([1, 5]: min_solution_steps),
 * turns (9), temperature (0), device (cpu), format (answer; free_think and wm as the
 * demo writes them), cellPixels (14; the CUDA recipe's policies read 28), verbose.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import { demoTask } from "../../src/demo/task.ts";
import { validate } from "../../src/demo/validate.ts";

const o = { model: "", evalDir: "", episodes: 128, levels: [1, 5], turns: 9, temperature: 0, device: "cpu", format: "answer", cellPixels: 14, verbose: false, ...JSON.parse(process.argv[2] ?? "{}") };
const task = demoTask("sokoban", "vision", undefined, { levels: { dimRoom: [6, 6], numBoxes: 1, minSolutionSteps: o.levels }, format: o.format, maxTurns: o.turns, cellPixels: o.cellPixels });
const evalDir: string = o.evalDir || mkdtempSync(join(tmpdir(), "sokoban-failures-"));
if (!existsSync(join(evalDir, "sokoban"))) {
  if (!o.model) throw new Error(`${evalDir} holds no episodes: give "model" (a model directory) to run them`);
  const result = await validate(task, { modelDir: o.model, outputDir: evalDir, episodes: o.episodes, device: o.device, maxTokens: o.format === "wm" ? 96 : o.format === "free_think" ? 24 : 10, temperature: o.temperature });
  console.log(JSON.stringify({ success_rate: result.successRate, episodes: result.episodes, dir: evalDir }));
}

const moves: Record<string, number> = {};
const endings: Record<string, number> = {};
const distance = (env: SokobanEnv) => shortestSolution(env.currentRoom!, 30)?.length ?? Infinity;
for (const name of readdirSync(join(evalDir, "sokoban")).sort()) {
  const dir = join(evalDir, "sokoban", name);
  if (!existsSync(join(dir, "messages.json"))) continue;
  const seed = Number(/seed_?(\d+)/.exec(name)?.[1]);
  const messages = JSON.parse(readFileSync(join(dir, "messages.json"), "utf8")) as { role: string; content: { text?: string }[] }[];
  const answers = messages.filter((m) => m.role === "assistant").map((m) => /<answer>(\w+)<\/answer>/.exec(m.content[0]?.text ?? "")?.[1] ?? "");
  // Replayed as bare answers, whatever format the policy wrote them in.
  const env = new SokobanEnv({ ...task.envConfig, prompt_format: "no_think", render_mode: "text" });
  const reset = await env.reset(seed);
  let before = distance(env);
  const states: string[] = [String(reset.info.state_key)];
  const kinds: string[] = [];
  let ending = "turns";
  for (const answer of answers) {
    const step = await env.step(`<answer>${answer}</answer>`);
    const after = distance(env);
    const key = String(step.info.state_key);
    const kind = step.done && step.info.success ? "solved" : key === states.at(-1) ? "bump" : after === Infinity ? "deadlock" : after < before ? "closer" : "detour";
    kinds.push(kind);
    states.push(key);
    before = after;
    if (kind === "solved" || kind === "deadlock") {
      ending = kind === "solved" ? "solved" : "deadlocked";
      break;
    }
  }
  if (ending === "turns" && states.length >= 4 && new Set(states.slice(-4)).size === 1) ending = "stuck";
  for (const k of kinds) moves[k] = (moves[k] ?? 0) + 1;
  endings[ending] = (endings[ending] ?? 0) + 1;
  if (o.verbose && ending !== "solved") console.log(seed, ending, kinds.join(","), answers.join(","));
}
console.log(JSON.stringify({ moves, endings }));
