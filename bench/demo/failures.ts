/**
 * How a demo policy fails: runs greedy validation episodes of a model directory on the
 * demo's held-out FrozenLake boards (or reads an eval folder already written), replays
 * each episode's moves on its board, and sorts every move into
 *   optimal  one step closer to the goal by the shortest path around the holes
 *   detour   onto ice, but not closer
 *   bump     into the edge (the player stays)
 *   hole     into a hole (the episode ends)
 *   goal     onto the goal
 * and every episode by how it ended (goal, hole, or out of turns). With `verbose`, each
 * failed episode is printed with its board (rows joined by /) and moves.
 *
 *   OMP_NUM_THREADS=1 bun bench/demo/failures.ts '{"model":"runs/demo/x/sft/final","episodes":128}'
 *   bun bench/demo/failures.ts '{"evalDir":"/tmp/val","verbose":true}'
 *
 * Options (JSON): model, evalDir (where episodes are written or read; default a temporary
 * folder), episodes, render (vision|text), size and p (the boards: 4 and 0.8 unless given), verbose.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { moveFrom } from "../../envs/frozenlake/dynamics.ts";
import { findCell, shortestPath, type FrozenLakeAction } from "../../envs/frozenlake/map.ts";
import { demoTask } from "../../src/demo/task.ts";
import { validate } from "../../src/demo/validate.ts";

const o = { model: "", evalDir: "", episodes: 128, render: "vision", size: 4, p: 0.8, verbose: false, ...JSON.parse(process.argv[2] ?? "{}") };
const task = demoTask("frozenlake", o.render, { size: o.size, p: o.p });
const evalDir: string = o.evalDir || mkdtempSync(join(tmpdir(), "demo-failures-"));
if (!existsSync(join(evalDir, "frozenlake"))) {
  if (!o.model) throw new Error(`${evalDir} holds no episodes: give "model" (a model directory) to run them`);
  const result = await validate(task, { modelDir: o.model, outputDir: evalDir, episodes: o.episodes, device: "cpu", maxTokens: 10 });
  console.log(JSON.stringify({ success_rate: result.successRate, episodes: result.episodes, dir: evalDir }));
}

type Kind = "optimal" | "detour" | "bump" | "hole" | "goal" | "unparsed";
const moves: Record<string, number> = {};
const endings: Record<string, number> = {};
const distance = (desc: readonly string[], at: readonly [number, number]) => shortestPath(desc, at)?.length ?? Infinity;

for (const name of readdirSync(join(evalDir, "frozenlake")).sort()) {
  const dir = join(evalDir, "frozenlake", name);
  if (!existsSync(join(dir, "messages.json"))) continue;
  const seed = Number(/seed_(\d+)/.exec(name)?.[1]);
  const messages = JSON.parse(readFileSync(join(dir, "messages.json"), "utf8")) as { role: string; content: { text?: string }[] }[];
  const answers = messages.filter((m) => m.role === "assistant").map((m) => /<answer>(\w+)<\/answer>/.exec(m.content[0]?.text ?? "")?.[1]?.toLowerCase());
  // The same board the episode played: the env's map for this seed.
  const env = new FrozenLakeEnv({ ...task.envConfig, render_mode: "text" });
  await env.reset(seed);
  const desc = env.current!.desc;
  let [row, col] = findCell(desc, "S")!;
  let ending = "turns";
  const kinds: Kind[] = [];
  for (const answer of answers) {
    if (!answer) {
      kinds.push("unparsed");
      continue;
    }
    const [r, c] = moveFrom(desc, row, col, answer as FrozenLakeAction);
    const tile = desc[r]![c]!;
    const kind: Kind = tile === "H" ? "hole" : tile === "G" ? "goal" : r === row && c === col ? "bump" : distance(desc, [r, c]) < distance(desc, [row, col]) ? "optimal" : "detour";
    kinds.push(kind);
    [row, col] = [r, c];
    if (kind === "hole" || kind === "goal") {
      ending = kind;
      break;
    }
  }
  for (const k of kinds) moves[k] = (moves[k] ?? 0) + 1;
  endings[ending] = (endings[ending] ?? 0) + 1;
  if (o.verbose && ending !== "goal") console.log(seed, desc.join("/"), kinds.join(","), answers.join(","));
}
console.log(JSON.stringify({ moves, endings }));
