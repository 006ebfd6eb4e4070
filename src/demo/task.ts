/**
 * The demo's task: which env, with what config, and the base policy made for it (a
 * tokenizer learned on the task's own text, then a small random Qwen2.5-VL over it).
 */
import { messageText } from "../core/chat.ts";
import type { SolverDataConfig } from "../sft/config.ts";
import { solverEpisodes } from "../sft/episodes.ts";
import { OBSERVATION_ONLY_HARNESS } from "../harness/observation-only.ts";
import { DEMO_MODEL_SPEC, oneTokenPerCell, parameterCount, writeTinyQwenModelDir, type TinyQwenSpec } from "./model-dir.ts";
import { trainBpeTokenizer } from "./tokenizer.ts";

export type DemoEnv = "frozenlake" | "sokoban";
export type DemoRender = "vision" | "text";
/** A FrozenLake board's side and the chance that a tile is ice rather than a hole. */
export interface FrozenLakeBoard {
  size: number;
  p: number;
}

export interface DemoTask {
  /** Registered env name. */
  envName: "FrozenLake" | "Sokoban";
  envConfig: Record<string, unknown>;
  /** The harness every phase runs (and the supervised samples' layout). */
  harness: typeof OBSERVATION_ONLY_HARNESS;
  /**
   * The image processor's pixel budget. FrozenLake: one merged image token per board cell.
   * Sokoban's renders (16 px a cell, 96 x 96 for 6x6) come out 84 x 84 under any budget.
   */
  maxPixels: number;
  /** Turn limit per episode (enough for a shortest path plus a few detours). */
  maxTurns: number;
  /** Seeds of the supervised demonstrations, RL and validation: three disjoint ranges. */
  sftSeedStart: number;
  trainSeedStart: number;
  valSeedStart: number;
}

/**
 * FrozenLake on `board` (4x4 with p 0.8 unless given; not slippery), one move per answer,
 * answers only (`<answer>Right</answer>`):
 * a reactive policy that reads the board each turn. Sokoban: 6x6 rooms with one box.
 */
export function demoTask(env: DemoEnv, render: DemoRender, board: FrozenLakeBoard = { size: 4, p: 0.8 }): DemoTask {
  const seeds = { sftSeedStart: 1_000_000, trainSeedStart: 0, valSeedStart: 5_000_000, harness: OBSERVATION_ONLY_HARNESS };
  const answerOnly = { prompt_format: "no_think", max_actions_per_step: 1, use_example_in_sys_prompt: false, render_mode: render };
  if (env === "frozenlake") {
    return { envName: "FrozenLake", envConfig: { ...answerOnly, size: board.size, p: board.p }, maxPixels: oneTokenPerCell(board.size), maxTurns: 8, ...seeds };
  }
  return { envName: "Sokoban", envConfig: { ...answerOnly, dim_room: [6, 6], num_boxes: 1 }, maxPixels: DEMO_MODEL_SPEC.maxPixels, maxTurns: 10, ...seeds };
}

/** Solver demonstrations for `task` (the SFT phase's data, and the tokenizer's corpus). */
export function demoSolverData(
  task: DemoTask,
  episodes: number,
  randomActionProb: number,
  imperfections: { carelessEpisodeProb?: number; randomMoves?: "any" | "safe" } = {},
): SolverDataConfig {
  return {
    env: task.envName,
    config: task.envConfig,
    episodes,
    seed_start: task.sftSeedStart,
    max_turns: task.maxTurns,
    random_action_prob: randomActionProb,
    // Only FrozenLake has a careless solver and knows which moves are safe.
    random_moves: task.envName === "FrozenLake" ? (imperfections.randomMoves ?? "any") : "any",
    actions_per_turn: 1,
    careless_episode_prob: task.envName === "FrozenLake" ? (imperfections.carelessEpisodeProb ?? 0) : 0,
  };
}

/**
 * Write the demo's base policy to `dir`: a tokenizer whose merges come from the task's text
 * (system prompt, observations and answers of a few solver episodes, with the chat
 * template's role lines), and random weights from `seed`, with the task's pixel budget
 * (one image token a board cell). Returns its parameter count.
 */
export async function writeDemoBaseModel(dir: string, task: DemoTask, opts: { seed: number; spec?: TinyQwenSpec }): Promise<{ parameters: number; vocabSize: number }> {
  const spec = { ...(opts.spec ?? DEMO_MODEL_SPEC), maxPixels: task.maxPixels };
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
