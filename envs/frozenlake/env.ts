/**
 * The FrozenLake env (VAGEN main `frozenlake_env.py`, spec 3.3): a new map per
 * `reset(seed)`, up to `max_actions_per_step` moves per turn, the turn ends at the first
 * unknown word or when the player reaches the goal or a hole.
 *
 * Divergences from VAGEN, on purpose: `slip_prob` draws from a per-episode generator
 * seeded by the reset seed (VAGEN uses numpy's unseeded global RNG), so episodes replay
 * exactly; and once the episode is done (goal or hole), further steps change nothing and
 * pay nothing, where VAGEN pays the success reward again on every step at the goal.
 */
import { VagenError } from "../../src/core/errors.ts";
import { parseConfig } from "../_common/config.ts";
import { finishCooperatively } from "../_common/cooperative.ts";
import { stepInfo } from "../_common/step-info.ts";
import { actionObservationText, initialObservationText } from "../_common/observation.ts";
import { isWmFormat, parseResponse, type ParsedResponse } from "../_common/parsers.ts";
import { Rng } from "../../src/core/rng.ts";
import { gridObject, type GridState, type Position } from "../_common/state.ts";
import { FROZENLAKE_STATE_REWARD_SPEC } from "./state-reward-spec.ts";
import type { Env, EnvInfo, Observation, ResetResult, StepResult } from "../_common/types.ts";
import { FROZENLAKE_REWARD_PRESETS, frozenLakeConfigSchema, type FrozenLakeConfig, type FrozenLakeConfigInput } from "./config.ts";
import { applyCustomSlip, gymnasiumSlip, isTerminalTile, moveFrom } from "./dynamics.ts";
import { FL_ACTIONS, MapGenerationError, findCell, randomMapWork, shortestPath, type FrozenLakeAction } from "./map.ts";
import { frozenLakeSystemPrompt } from "./prompts.ts";
import { FrozenLakeImageRenderer, renderText } from "./render.ts";

const ACTION_SET = new Set<string>(FL_ACTIONS);
/** Stream id separating slip noise from map generation for the same seed. */
const SLIP_STREAM = 1;

export class FrozenLakeEnv implements Env {
  /** What the world-model reward needs to score this env's descriptions (src/rewards). */
  readonly stateRewardSpec = FROZENLAKE_STATE_REWARD_SPEC;
  readonly config: FrozenLakeConfig;
  private readonly formatReward: number;
  private readonly successReward: number;
  private readonly formatRewardNeedsValidTurn: boolean;
  private readonly images = new FrozenLakeImageRenderer();
  private desc: string[] | null = null;
  private row = 0;
  private col = 0;
  private lastAction: FrozenLakeAction | null = null;
  /** Set when the player reached the goal or fell in a hole; later steps are no-ops. */
  private ended: { success: boolean } | null = null;
  private slipRng = new Rng(0, SLIP_STREAM);
  totalReward = 0;

  constructor(config: FrozenLakeConfigInput | FrozenLakeConfig = {}) {
    this.config = parseConfig(frozenLakeConfigSchema, config, { subject: 'env "FrozenLake"' });
    const preset = FROZENLAKE_REWARD_PRESETS[this.config.reward_preset];
    this.formatReward = this.config.format_reward ?? preset.format_reward;
    this.successReward = this.config.success_reward ?? preset.success_reward;
    this.formatRewardNeedsValidTurn = this.config.reward_preset === "paper";
  }

  async reset(seed: number): Promise<ResetResult> {
    this.desc = this.config.desc ? [...this.config.desc] : await this.generateMap(seed);
    this.ended = null;
    const start = findCell(this.desc, "S")!;
    [this.row, this.col] = start;
    this.lastAction = null;
    this.slipRng = new Rng(seed, SLIP_STREAM);
    this.totalReward = 0;
    const info: EnvInfo = { state: this.groundTruth(), map: [...this.desc], state_key: this.stateKey() };
    const path = shortestPath(this.desc);
    if (path) info.optimal_solution_length = path.length;
    return { obs: this.observe(null), info };
  }

  async step(response: string): Promise<StepResult> {
    const desc = this.requireMap();
    const parsed = parseResponse(response, {
      format: this.config.prompt_format,
      actionSep: this.config.action_sep,
      maxActions: this.config.max_actions_per_step,
    });
    if (this.ended) return this.stepAfterEnd(parsed, this.ended.success);
    const start: Position = [this.row, this.col];
    const validActions: string[] = [];
    // FrozenLake has always been strict: under the wm formats a malformed turn's salvaged
    // actions are not run.
    const actions = isWmFormat(this.config.prompt_format) && !parsed.format_correct ? [] : parsed.actions;
    let actionIsValid = actions.length > 0 && parsed.format_correct;
    let done = false;
    let success = false;
    let reward = 0;

    for (const word of actions) {
      if (!ACTION_SET.has(word)) {
        actionIsValid = false;
        break;
      }
      const intended = applyCustomSlip(word as FrozenLakeAction, this.config.slip_prob, this.slipRng);
      const direction = this.config.is_slippery ? gymnasiumSlip(intended, this.slipRng) : intended;
      [this.row, this.col] = moveFrom(desc, this.row, this.col, direction);
      this.lastAction = intended;
      validActions.push(word);
      const tile = desc[this.row]![this.col]!;
      done = isTerminalTile(tile);
      if (done) {
        if (tile === "G") {
          success = true;
          reward += this.successReward;
        }
        break;
      }
    }

    const earnsFormat = this.formatRewardNeedsValidTurn
      ? actionIsValid && parsed.format_correct
      : validActions.length > 0 && parsed.format_correct;
    if (earnsFormat) reward += this.formatReward;
    this.totalReward += reward;
    if (done) this.ended = { success };

    const turn = { actionIsValid, actionIsEffective: this.row !== start[0] || this.col !== start[1], success };
    const info = { ...stepInfo(parsed, turn, this.groundTruth(), validActions), state_key: this.stateKey() };
    return { obs: this.observe(validActions), reward, done, info };
  }

  /** A step after the goal or a hole: nothing moves, nothing is paid, the episode stays done. */
  private stepAfterEnd(parsed: ParsedResponse, success: boolean): StepResult {
    const turn = { actionIsValid: false, actionIsEffective: false, success };
    const info = { ...stepInfo(parsed, turn, this.groundTruth(), []), after_done: true };
    return { obs: this.observe([]), reward: 0, done: true, info };
  }

  private async generateMap(seed: number): Promise<string[]> {
    const { size, p, max_generation_attempts: attempts } = this.config;
    try {
      return await finishCooperatively(randomMapWork(size, p, seed, attempts));
    } catch (err) {
      if (!(err instanceof MapGenerationError)) throw err;
      throw new VagenError(
        `FrozenLake: could not generate a map with size=${size}, p=${p} in ${attempts} boards (max_generation_attempts): no path joined start and goal`,
        "raise p (the chance a cell is frozen) or max_generation_attempts",
      );
    }
  }

  async systemPrompt(): Promise<Observation> {
    const c = this.config;
    return { text: frozenLakeSystemPrompt(c.prompt_format, c.max_actions_per_step, c.action_sep, c.use_example_in_sys_prompt), images: [] };
  }

  async close(): Promise<void> {
    this.desc = null;
  }

  /**
   * The env state as a string (board and player cell): equal keys are the same state
   * whatever the turn or the route there (GiGPO's anchor states, src/rollout).
   */
  private stateKey(): string {
    return `${this.requireMap().join("/")}@${this.row},${this.col}`;
  }

  /** The current map rows and player cell (read-only use). */
  get current(): { desc: readonly string[]; row: number; col: number } | null {
    return this.desc ? { desc: this.desc, row: this.row, col: this.col } : null;
  }

  private observe(validActions: readonly string[] | null): Observation {
    const view = { desc: this.requireMap(), row: this.row, col: this.col, lastAction: this.lastAction };
    const vision = this.config.render_mode === "vision";
    const body = vision ? this.config.image_placeholder : renderText(view);
    const text = validActions === null ? initialObservationText(body) : actionObservationText(validActions, body);
    return { text, images: vision ? [this.images.render(view)] : [] };
  }

  private groundTruth(): GridState {
    const desc = this.requireMap();
    const player: Position = [this.row, this.col];
    const objects = [];
    for (let r = 0; r < desc.length; r++) {
      for (let c = 0; c < desc[r]!.length; c++) {
        const tile = desc[r]![c];
        if (tile === "G") objects.push(gridObject("goal", player, [r, c]));
        else if (tile === "H") objects.push(gridObject("hole", player, [r, c]));
      }
    }
    return { grid_size: [desc.length, desc[0]!.length], player, objects };
  }

  private requireMap(): string[] {
    if (!this.desc) throw new Error("FrozenLake: call reset(seed) before step() or rendering");
    return this.desc;
  }
}
