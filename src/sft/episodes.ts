/**
 * Where supervised trajectories come from, as one shape: an episode's system prompt, the
 * observations the agent saw (the first one and the one after each turn) and its replies.
 *
 * - Solver episodes: the env is played through the real harness loop, with a client that
 *   answers from a solver (BFS for FrozenLake and Sokoban) instead of a model; a share of
 *   the moves is random (on FrozenLake optionally only safe moves, never into a hole), and
 *   a share of the episodes can come from a careless solver (FrozenLake's blind to holes,
 *   Sokoban's walking to each push as if the box were not in its way), so demonstrations
 *   can be imperfect on purpose. Under the thinking formats the solver writes its
 *   reasoning too (reasoning.ts): `free_think` its plan, Sokoban's world-model
 *   formats the state it sees and the state its moves lead to, from the true state, with
 *   `state_noise_prob` of the stated objects misplaced.
 * - Eval episodes: the folders `vagen eval` writes (messages.json with its PNGs, and
 *   metrics.json for the outcome).
 *
 * Either way the messages are exactly what a harness sends a model, so a policy trained on
 * them is prompted the same way in RL and in evaluation.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import * as v from "valibot";
import { join } from "node:path";
import type { Env } from "../../envs/_common/types.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { moveFrom } from "../../envs/frozenlake/dynamics.ts";
import { FL_ACTIONS, shortestPath } from "../../envs/frozenlake/map.ts";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { allBoxesOnTarget, applyMove } from "../../envs/sokoban/dynamics.ts";
import { sokobanGridState } from "../../envs/sokoban/ground-truth.ts";
import { ACTIONS as SOKOBAN_ACTIONS, CELL, DELTAS, cloneRoom, playerIndex, type SokobanAction, type SokobanRoom } from "../../envs/sokoban/room.ts";
import { isWmFormat } from "../../envs/_common/parsers.ts";
import type { GridState } from "../../envs/_common/state.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import type { Completion, InferenceClient } from "../clients/types.ts";
import type { ChatMessage, ContentPart } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import { Rng } from "../core/rng.ts";
import { observationToMessage, reportedSuccess } from "../harness/observation.ts";
import { createHarness } from "../harness/registry.ts";
import { readPng } from "../models/image-io.ts";
import { frozenLakeOnlyProblem, type SolverDataConfig } from "./config.ts";
import { solverReply } from "./reasoning.ts";

/** One episode as the agent lived it. `observations.length` is `replies.length + 1`. */
export interface Episode {
  /** Where it came from, for messages (e.g. `FrozenLake seed 7`, or a folder). */
  source: string;
  system: ChatMessage;
  observations: ChatMessage[];
  replies: string[];
  success: boolean;
}

/** The next moves an expert would make from the env's current state (empty: no plan). */
type Planner = () => string[];

interface SolverEnv {
  env: Env;
  planner: Planner;
  actions: readonly string[];
  /** The moves from the current state onto ice or the goal (FrozenLake only). */
  safeActions?: () => string[];
  /** The true state now and after `moves` (Sokoban only: what the world-model formats state). */
  states?: (moves: readonly string[]) => { before: GridState; after: GridState };
}

function solverEnv(config: SolverDataConfig, careless: boolean): SolverEnv {
  if (config.env === "FrozenLake") {
    const env = new FrozenLakeEnv(config.config);
    const planner = () => {
      const at = env.current;
      if (!at) return [];
      // The careless solver plans on a board whose holes it takes for ice.
      const board = careless ? at.desc.map((row) => row.replaceAll("H", "F")) : at.desc;
      return shortestPath(board, [at.row, at.col]) ?? [];
    };
    const safeActions = () => {
      const at = env.current;
      if (!at) return [];
      return FL_ACTIONS.filter((action) => {
        const [row, col] = moveFrom(at.desc, at.row, at.col, action);
        return (row !== at.row || col !== at.col) && at.desc[row]![col] !== "H";
      });
    };
    return { env, planner, actions: FL_ACTIONS, safeActions };
  }
  const env = new SokobanEnv(config.config);
  const planner = () => {
    const room = env.currentRoom;
    if (!room) return [];
    return careless ? boxBlindPlan(room) : (shortestSolution(room, 100, 50_000) ?? []);
  };
  const states = (moves: readonly string[]) => {
    const room = env.currentRoom;
    if (!room) throw new Error("Sokoban solver: no room (reset first)");
    return { before: sokobanGridState(room), after: sokobanGridState(afterMoves(room, moves)) };
  };
  return { env, planner, actions: SOKOBAN_ACTIONS, states };
}

/**
 * Sokoban's careless solver: the careful solver's next push, but walked to by the shortest
 * way as if the boxes were floor and, where one of the shortest ways crosses a box,
 * straight through it (a player who does not see the box as being in the way heads at
 * it). The walk then pushes the box, often against a wall or into a corner, and the level
 * can no longer be solved. Empty when the room has no solution (the client then moves at
 * random).
 */
export function boxBlindPlan(room: SokobanRoom): SokobanAction[] {
  const plan = shortestSolution(room, 100, 50_000);
  if (!plan || plan.length === 0) return [];
  // Replay the plan up to its first push: where the player must stand, and which way it pushes.
  const replay = cloneRoom(room);
  let at = playerIndex(replay);
  for (const move of plan) {
    const result = applyMove(replay, at, move);
    if (result.pushedBox) {
      if (at === playerIndex(room)) return plan;
      return [...walkThroughBoxes(room, playerIndex(room), at), move];
    }
    at = playerIndex(replay);
  }
  return plan;
}

/** A shortest walk from cell `from` to cell `to` that takes boxes for floor, through a box where one lies on such a walk. */
function walkThroughBoxes(room: SokobanRoom, from: number, to: number): SokobanAction[] {
  const fromStart = distancesIgnoringBoxes(room, from);
  const toEnd = distancesIgnoringBoxes(room, to);
  const length = fromStart[to]!;
  if (length < 0) return [];
  // A cell lies on a shortest walk when the ways to it and on from it add up to the shortest.
  const box = room.state.findIndex((cell, i) => (cell === CELL.box || cell === CELL.boxOnTarget) && fromStart[i]! >= 0 && fromStart[i]! + toEnd[i]! === length);
  return box < 0 ? walkIgnoringBoxes(room, from, to) : [...walkIgnoringBoxes(room, from, box), ...walkIgnoringBoxes(room, box, to)];
}

/** A cell's neighbours that are not walls, in the order up, down, left, right. */
function openNeighbours(room: SokobanRoom, cell: number): { step: number; move: SokobanAction }[] {
  const { width, height, fixed } = room;
  const out: { step: number; move: SokobanAction }[] = [];
  for (const move of SOKOBAN_ACTIONS) {
    const [dr, dc] = DELTAS[move];
    const row = Math.floor(cell / width) + dr;
    const col = (cell % width) + dc;
    const step = row * width + col;
    if (row < 0 || col < 0 || row >= height || col >= width || fixed[step] === CELL.wall) continue;
    out.push({ step, move });
  }
  return out;
}

/** Moves from `from` to every cell through everything but walls (-1: walled off). */
function distancesIgnoringBoxes(room: SokobanRoom, from: number): Int32Array {
  const distance = new Int32Array(room.width * room.height).fill(-1);
  distance[from] = 0;
  for (let frontier = [from]; frontier.length > 0; ) {
    const next: number[] = [];
    for (const cell of frontier) {
      for (const { step } of openNeighbours(room, cell)) {
        if (distance[step]! >= 0) continue;
        distance[step] = distance[cell]! + 1;
        next.push(step);
      }
    }
    frontier = next;
  }
  return distance;
}

/** The shortest walk from cell `from` to cell `to` through everything but walls (up, down, left, right first). */
function walkIgnoringBoxes(room: SokobanRoom, from: number, to: number): SokobanAction[] {
  const previous = new Map<number, { cell: number; move: SokobanAction }>();
  let frontier = [from];
  const seen = new Set([from]);
  while (frontier.length > 0 && !seen.has(to)) {
    const next: number[] = [];
    for (const cell of frontier) {
      for (const { step, move } of openNeighbours(room, cell)) {
        if (seen.has(step)) continue;
        seen.add(step);
        previous.set(step, { cell, move });
        next.push(step);
      }
    }
    frontier = next;
  }
  const walk: SokobanAction[] = [];
  for (let cell = to; cell !== from; ) {
    const back = previous.get(cell);
    if (!back) return [];
    walk.push(back.move);
    cell = back.cell;
  }
  return walk.reverse();
}

/** A copy of `room` after `moves`, run as the env runs a turn's actions: stopping once solved. */
function afterMoves(room: SokobanRoom, moves: readonly string[]): SokobanRoom {
  const next = cloneRoom(room);
  for (const move of moves) {
    applyMove(next, playerIndex(next), move as SokobanAction);
    if (allBoxesOnTarget(next)) break;
  }
  return next;
}

/** The prompt formats whose reasoning the solver writes, per env (the rest answer only). */
const ANSWER_FORMATS = ["no_think", "eval_mode"];
const SOLVER_FORMATS: Record<SolverDataConfig["env"], readonly string[]> = {
  FrozenLake: [...ANSWER_FORMATS, "free_think"],
  Sokoban: [...ANSWER_FORMATS, "free_think", "wm", "wm_think", "free_wm"],
};

/**
 * A client that plays the solver's moves: each answer is `<answer>A,B</answer>` with up to
 * `actions_per_turn` moves, each replaced by a random one with `random_action_prob`, after
 * the format's reasoning (reasoning.ts), written from the plan and the true state.
 */
class SolverClient implements InferenceClient {
  readonly description = "solver";

  constructor(
    private readonly solver: SolverEnv,
    private readonly config: SolverDataConfig,
    private readonly format: string,
    private readonly separator: string,
    private readonly rng: Rng,
    /** Its own stream, so the noise of descriptions leaves the moves' draws alone. */
    private readonly noiseRng: Rng,
  ) {}

  async create(): Promise<Completion> {
    const plan = this.solver.planner();
    const moves: string[] = [];
    for (let i = 0; i < this.config.actions_per_turn; i++) {
      const planned = plan[i];
      if (planned === undefined && i > 0) break;
      const random = planned === undefined || this.rng.next() < this.config.random_action_prob;
      // After a random move the rest of the plan no longer applies: end the answer there.
      moves.push(random ? this.randomMove() : planned!);
      if (random) break;
    }
    const states = isWmFormat(this.format) ? this.solver.states?.(moves) : undefined;
    const text = solverReply(this.format, { moves, separator: this.separator, plan, ...states }, this.config.state_noise_prob ?? 0, this.noiseRng);
    return { text, finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 } };
  }

  private randomMove(): string {
    const safe = this.config.random_moves === "safe" ? this.solver.safeActions?.() : undefined;
    // A player boxed in by holes and edges has no safe move: it takes any.
    const from = safe?.length ? safe : this.solver.actions;
    return from[this.rng.int(from.length)]!;
  }
}

/**
 * Play `config.episodes` episodes with the solver through the harness loop. The harness
 * only decides what the solver is sent, which it ignores; the episode keeps every
 * observation, and samples.ts frames them for the harness the policy will run under.
 */
export async function solverEpisodes(config: SolverDataConfig, opts: { seed: number }): Promise<Episode[]> {
  // Configs from files were checked already (checkSftConfig); this guards built ones.
  const frozenLakeOnly = frozenLakeOnlyProblem(config);
  if (frozenLakeOnly) throw new VagenError(`data.solver.${frozenLakeOnly.key}: ${frozenLakeOnly.message}`);
  const harness = await createHarness("no_concat", {});
  const episodes: Episode[] = [];
  const rng = new Rng(opts.seed, 7);
  // Its own stream, so adding careless episodes leaves the random moves' draws alone.
  const carelessRng = new Rng(opts.seed, 8);
  const noiseRng = new Rng(opts.seed, 9);
  for (let i = 0; i < config.episodes; i++) {
    const careless = config.careless_episode_prob > 0 && carelessRng.next() < config.careless_episode_prob;
    const solver = solverEnv(config, careless);
    const envConfig = (solver.env as FrozenLakeEnv | SokobanEnv).config;
    const format = String(envConfig.prompt_format);
    const formats = SOLVER_FORMATS[config.env];
    if (!formats.includes(format)) {
      throw new VagenError(
        `data.solver.config.prompt_format: got "${format}", expected one of ${formats.join(", ")} for ${config.env}`,
        "the solver writes answers, free_think plans and (Sokoban) world-model descriptions; not the paper's formats",
      );
    }
    if ((config.state_noise_prob ?? 0) > 0 && !isWmFormat(format)) {
      throw new VagenError(`data.solver.state_noise_prob: got ${config.state_noise_prob} under prompt_format "${format}", expected 0 (only the wm formats state positions)`);
    }
    const seed = config.seed_start + i;
    const client = new SolverClient(solver, config, format, String(envConfig.action_sep), rng, noiseRng);
    const record = await harness.runEpisode({ env: solver.env, client, seed, maxTurns: config.max_turns, sampling: {} });
    await solver.env.close();
    if (record.error) throw new VagenError(`${config.env} seed ${seed}: the solver episode ended in an error: ${record.error.message}`);
    const lastInfo = record.turns.at(-1)?.info;
    episodes.push({
      source: `${config.env} seed ${seed}${careless ? " (careless solver)" : ""}`,
      system: observationToMessage("system", record.systemPrompt),
      observations: [record.initialObservation, ...record.turns.map((t) => t.observation)].map((o) => observationToMessage("user", o)),
      replies: record.turns.map((t) => t.completion.text),
      success: reportedSuccess(lastInfo) === true,
    });
  }
  return episodes;
}

/** messages.json as `vagen eval` writes it (images as PNG paths relative to the episode folder). */
const DumpedMessages = v.array(
  v.object({
    role: v.picklist(["system", "user", "assistant"]),
    content: v.array(v.union([v.object({ type: v.literal("text"), text: v.string() }), v.object({ type: v.literal("image"), path: v.string() })])),
  }),
);
type DumpedMessage = v.InferOutput<typeof DumpedMessages>[number];

/** A JSON file of an episode folder, checked: garbage is an error naming the file and what is wrong. */
function readJsonFile<S extends v.GenericSchema>(path: string, schema: S, what: string): v.InferOutput<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new VagenError(`${path}: not valid JSON (${(err as Error).message})`, `expected ${what} as vagen eval writes it; remove or re-run the episode`);
  }
  const parsed = v.safeParse(schema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const at = issue.path?.map((p) => String(p.key)).join(".") || "(top level)";
    throw new VagenError(`${path}: at ${at}: ${issue.message}`, `expected ${what} as vagen eval writes it`);
  }
  return parsed.output;
}

/** Every episode folder (`<tag>/seed_<N>/` with messages.json and metrics.json) under `dir`. */
function evalEpisodeDirs(dir: string): string[] {
  if (!existsSync(dir)) throw new VagenError(`data.eval_dirs: ${dir}: directory not found`, "give folders that vagen eval wrote (its output_dir)");
  if (!statSync(dir).isDirectory()) throw new VagenError(`data.eval_dirs: ${dir}: a file, expected a directory`, "give folders that vagen eval wrote (its output_dir)");
  const found: string[] = [];
  for (const tag of readdirSync(dir, { withFileTypes: true })) {
    if (!tag.isDirectory()) continue;
    for (const ep of readdirSync(join(dir, tag.name), { withFileTypes: true })) {
      const epDir = join(dir, tag.name, ep.name);
      if (ep.isDirectory() && existsSync(join(epDir, "messages.json")) && existsSync(join(epDir, "metrics.json"))) found.push(epDir);
    }
  }
  return found.sort();
}

/** Read one episode folder written by `vagen eval`. */
function readEvalEpisode(dir: string): Episode {
  const messagesPath = join(dir, "messages.json");
  const dumped = readJsonFile(messagesPath, DumpedMessages, "a list of chat messages");
  const metrics = readJsonFile(join(dir, "metrics.json"), v.object({ success: v.optional(v.nullable(v.boolean())) }), "an episode's metrics object");
  const toMessage = (m: DumpedMessage): ChatMessage => ({
    role: m.role,
    content: m.content.map((part): ContentPart => (part.type === "image" ? { type: "image", image: readPng(join(dir, part.path)) } : { type: "text", text: part.text })),
  });
  const [system, ...rest] = dumped;
  if (!system || system.role !== "system" || rest[0]?.role !== "user") {
    throw new VagenError(`${messagesPath}: expected a system message then a user message first`);
  }
  const observations: ChatMessage[] = [];
  const replies: string[] = [];
  rest.forEach((m, i) => {
    const expected = i % 2 === 0 ? "user" : "assistant";
    if (m.role !== expected) throw new VagenError(`${messagesPath}: message ${i + 1}: expected role "${expected}", got "${m.role}"`);
    if (m.role === "user") observations.push(toMessage(m));
    else replies.push(m.content.map((p) => (p.type === "text" ? p.text : "")).join(""));
  });
  // An episode cut short by an error ends on a reply without the observation after it.
  if (observations.length === replies.length) observations.push({ role: "user", content: [] });
  return { source: dir, system: toMessage(system), observations, replies, success: metrics.success === true };
}

/** Every episode under the given `vagen eval` output directories. */
export function evalEpisodes(dirs: readonly string[]): Episode[] {
  return dirs.flatMap((dir) => evalEpisodeDirs(dir).map(readEvalEpisode));
}
