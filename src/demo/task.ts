/**
 * The demo's task: which env, with what config, and the base policy made for it (a
 * tokenizer learned on the task's own text, then a small random Qwen2.5-VL over it).
 */
import { messageText } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import type { SolverDataConfig } from "../sft/config.ts";
import { solverEpisodes } from "../sft/episodes.ts";
import { OBSERVATION_HISTORY_HARNESS } from "../harness/observation-history.ts";
import { OBSERVATION_ONLY_HARNESS } from "../harness/observation-only.ts";
import { DEMO_MODEL_SPEC, oneTokenPerCell, parameterCount, writeTinyQwenModelDir, type TinyQwenSpec } from "./model-dir.ts";
import { trainBpeTokenizer } from "./tokenizer.ts";

export type DemoEnv = "frozenlake" | "sokoban";
export type DemoRender = "vision" | "text";
/**
 * What the policy writes each turn: `answer` (`<answer>Right</answer>`, the env's no_think
 * format), `free_think` (a `<think>` with a short plan first) or `wm` (Sokoban: VAGEN's
 * world-model format, the state as perceived and the state after the moves, scored by the
 * state rewards).
 */
export const DEMO_FORMATS = ["answer", "free_think", "wm"] as const;
export type DemoFormat = (typeof DEMO_FORMATS)[number];
const PROMPT_FORMATS: Record<DemoFormat, string> = { answer: "no_think", free_think: "free_think", wm: "wm" };

/** Sokoban levels: room size (rows, columns), boxes, and the range of shortest-solution lengths kept. */
export interface SokobanLevels {
  dimRoom: [number, number];
  numBoxes: number;
  minSolutionSteps: [number, number] | null;
}

/** VAGEN's Sokoban dataset: 6x6 rooms, one box, levels solved in 1 to 5 moves. */
export const VAGEN_SOKOBAN_LEVELS: SokobanLevels = { dimRoom: [6, 6], numBoxes: 1, minSolutionSteps: [1, 5] };
/** A FrozenLake board's side and the chance that a tile is ice rather than a hole. */
export interface FrozenLakeBoard {
  size: number;
  p: number;
}

/**
 * What the policy sees each turn: the current observation's images alone, or those of the
 * whole episode so far with its own replies between them (src/harness/observation-*.ts).
 */
export type DemoHarness = typeof OBSERVATION_ONLY_HARNESS | typeof OBSERVATION_HISTORY_HARNESS;

export interface DemoTask {
  /** Registered env name. */
  envName: "FrozenLake" | "Sokoban";
  envConfig: Record<string, unknown>;
  /** The harness every phase runs (and the supervised samples' layout). */
  harness: DemoHarness;
  /**
   * The image processor's pixel budget. FrozenLake: one merged image token per board cell.
   * Sokoban: 14 px a cell (its 96 x 96 render of a 6x6 room comes out 84 x 84), one
   * vision patch a cell; or 28, one merged image token a cell.
   */
  maxPixels: number;
  /** The processor's smallest image area (unset: 56 x 56); Sokoban's is its exact size, so no room is scaled below it. */
  minPixels?: number;
  /** What a reply holds (unset: `answer`). */
  format?: DemoFormat;
  /** Turn limit per episode (enough for a shortest path plus a few detours). */
  maxTurns: number;
  /**
   * Seeds of the supervised demonstrations, RL, validation and the warm start's probe
   * (the recipe's `sftStopAtSuccess`): four disjoint ranges.
   */
  sftSeedStart: number;
  trainSeedStart: number;
  valSeedStart: number;
  probeSeedStart: number;
}

/**
 * FrozenLake on `board` (4x4 with p 0.8 unless given; not slippery), one move per answer,
 * answers only (`<answer>Right</answer>`) or after a plan (`free_think`): a reactive
 * policy that reads the board each turn. Sokoban on `options.levels` (VAGEN's 6x6
 * one-box levels unless given), one move per turn, in any of the demo's formats, with
 * `maxTurns` turns (unset: the longest solution kept plus four, for a detour); its
 * 16-px tiles are scaled to 14 px, one vision patch a cell (for even room sides). Every
 * phase runs `harness` (unset: observation_only).
 */
export function demoTask(
  env: DemoEnv,
  render: DemoRender,
  board: FrozenLakeBoard = { size: 4, p: 0.8 },
  options: { levels?: SokobanLevels; format?: DemoFormat; maxTurns?: number; cellPixels?: 14 | 28; harness?: DemoHarness } = {},
): DemoTask {
  const seeds = { sftSeedStart: 1_000_000, trainSeedStart: 0, valSeedStart: 5_000_000, probeSeedStart: 6_000_000, harness: options.harness ?? OBSERVATION_ONLY_HARNESS };
  const format = options.format ?? "answer";
  const oneMove = { prompt_format: PROMPT_FORMATS[format], max_actions_per_step: 1, use_example_in_sys_prompt: false, render_mode: render };
  if (env === "frozenlake") {
    if (format === "wm") throw new VagenError(`demo: --format wm: FrozenLake's demo has no world-model demonstrations`, "use --format answer or free_think, or --env sokoban");
    return { envName: "FrozenLake", envConfig: { ...oneMove, size: board.size, p: board.p }, maxPixels: oneTokenPerCell(board.size), format, maxTurns: 8, ...seeds };
  }
  const levels = options.levels ?? VAGEN_SOKOBAN_LEVELS;
  const [rows, cols] = levels.dimRoom;
  // The env renders 16 px a cell; at 14 px a cell each cell is one vision patch and each
  // merged image token 2 x 2 cells (84 x 84 for 6x6: 36 patches, 9 tokens). 28 px a cell
  // (one token a cell, as on FrozenLake: 168 x 168, 144 patches, 36 tokens) made a
  // supervised step 3.2 s instead of ~0.6 s on the CPU (docs/demo.md).
  const cell = options.cellPixels ?? 14;
  const pixels = cell * rows * cell * cols;
  return {
    envName: "Sokoban",
    envConfig: { ...oneMove, dim_room: levels.dimRoom, num_boxes: levels.numBoxes, min_solution_steps: levels.minSolutionSteps },
    maxPixels: pixels + cell * (rows + cols) + 1,
    minPixels: pixels,
    format,
    maxTurns: options.maxTurns ?? (levels.minSolutionSteps?.[1] ?? 10) + 4,
    ...seeds,
  };
}

/** Solver demonstrations for `task` (the SFT phase's data, and the tokenizer's corpus). */
export function demoSolverData(
  task: DemoTask,
  episodes: number,
  randomActionProb: number,
  imperfections: { carelessEpisodeProb?: number; randomMoves?: "any" | "safe"; stateNoiseProb?: number } = {},
): SolverDataConfig {
  return {
    env: task.envName,
    config: task.envConfig,
    episodes,
    seed_start: task.sftSeedStart,
    max_turns: task.maxTurns,
    random_action_prob: randomActionProb,
    // Only FrozenLake knows which moves are safe.
    random_moves: task.envName === "FrozenLake" ? (imperfections.randomMoves ?? "any") : "any",
    actions_per_turn: 1,
    careless_episode_prob: imperfections.carelessEpisodeProb ?? 0,
    // Only the world-model format states positions.
    state_noise_prob: task.format === "wm" ? (imperfections.stateNoiseProb ?? 0) : 0,
  };
}

/**
 * Write the demo's base policy to `dir`: a tokenizer whose merges come from the task's text
 * (system prompt, observations and answers of a few solver episodes, with the chat
 * template's role lines), and random weights from `seed`, with the task's pixel budget
 * (one image token a board cell). Returns its parameter count.
 */
export async function writeDemoBaseModel(dir: string, task: DemoTask, opts: { seed: number; spec?: TinyQwenSpec }): Promise<{ parameters: number; vocabSize: number }> {
  const spec = { ...(opts.spec ?? DEMO_MODEL_SPEC), maxPixels: task.maxPixels, minPixels: task.minPixels };
  const episodes = await solverEpisodes(demoSolverData(task, 16, 0.3), { seed: opts.seed });
  // The chat template's default system line opens every sample: learned as a whole, it
  // is eleven tokens instead of twenty.
  const corpus = Array<string>(16).fill("system\nYou are a helpful assistant.\nuser\nassistant\n");
  for (const e of episodes) {
    corpus.push(messageText(e.system), ...e.observations.map(messageText), ...e.replies);
  }
  // Every answer word must be one token whatever the demonstrations happened to hold.
  corpus.push(...["Left", "Down", "Right", "Up"].flatMap((a) => Array<string>(8).fill(`<answer>${a}</answer>`)));
  const tokenizer = trainBpeTokenizer(corpus, { maxMerges: 600 });
  writeTinyQwenModelDir(dir, spec, tokenizer, { seed: opts.seed });
  return { parameters: parameterCount(spec, tokenizer.vocabSize), vocabSize: tokenizer.vocabSize };
}
