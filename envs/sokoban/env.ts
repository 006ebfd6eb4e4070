/**
 * The Sokoban env (VAGEN main `sokoban_env.py`, spec 2.6): parse the turn, run up to
 * `max_actions_per_step` moves, stop at the first unknown word or on success, reward,
 * render. Once solved, further steps change nothing and pay nothing (`done` stays true).
 *
 * Levels are generated cooperatively (the event loop gets a turn every few milliseconds)
 * and within `max_generation_states`, so a server stays responsive and a config that
 * cannot be met ends in an error that names it.
 */
import { VagenError } from "../../src/core/errors.ts";
import { parseConfig } from "../_common/config.ts";
import { finishCooperatively } from "../_common/cooperative.ts";
import { stepInfo } from "../_common/step-info.ts";
import { actionObservationText, initialObservationText } from "../_common/observation.ts";
import { isWmFormat, parseResponse, type ParsedResponse } from "../_common/parsers.ts";
import type { GridState } from "../_common/state.ts";
import { SOKOBAN_STATE_REWARD_SPEC } from "./state-reward-spec.ts";
import { sokobanGridState } from "./ground-truth.ts";
import type { Env, EnvInfo, Observation, ResetResult, StepResult } from "../_common/types.ts";
import { resolveSokobanRewards, sokobanConfigSchema, type SokobanConfig, type SokobanConfigInput, type SokobanRewards } from "./config.ts";
import { allBoxesOnTarget, applyMove } from "./dynamics.ts";
import { LevelGenerationError, levelWork, type Level } from "./generate.ts";
import { sokobanSystemPrompt } from "./prompts.ts";
import { SokobanImageRenderer, renderText } from "./render.ts";
import { ACTIONS, CELL, playerIndex, type SokobanAction, type SokobanRoom } from "./room.ts";

const ACTION_SET = new Set<string>(ACTIONS);

export class SokobanEnv implements Env {
  /** What the world-model reward needs to score this env's descriptions (src/rewards). */
  readonly stateRewardSpec = SOKOBAN_STATE_REWARD_SPEC;
  readonly config: SokobanConfig;
  private readonly rewards: SokobanRewards;
  private readonly images = new SokobanImageRenderer();
  private room: SokobanRoom | null = null;
  private player = -1;
  private level: Level | null = null;
  /** True once the room has been solved; later steps are no-ops. */
  private solved = false;
  /** Sum of rewards since the last reset. */
  totalReward = 0;

  constructor(config: SokobanConfigInput | SokobanConfig = {}) {
    this.config = parseConfig(sokobanConfigSchema, config, { subject: 'env "Sokoban"' });
    this.rewards = resolveSokobanRewards(this.config);
  }

  async reset(seed: number): Promise<ResetResult> {
    this.level = await this.generateLevel(seed);
    this.room = this.level.room;
    this.player = playerIndex(this.room);
    this.totalReward = 0;
    this.solved = false;
    const info: EnvInfo = { state: this.groundTruth(), level_seed: this.level.seedUsed, state_key: this.stateKey() };
    if (this.level.solution) info.optimal_solution_length = this.level.solution.length;
    if (!this.level.accepted) info.level_filter_failed = true;
    return { obs: this.observe(null), info };
  }

  async step(response: string): Promise<StepResult> {
    const room = this.requireRoom();
    const parsed = parseResponse(response, {
      format: this.config.prompt_format,
      actionSep: this.config.action_sep,
      maxActions: this.config.max_actions_per_step,
    });
    if (this.solved) return this.stepAfterSolved(parsed);
    const startPlayer = this.player;
    const validActions: SokobanAction[] = [];
    // Under the wm formats a malformed turn's salvaged actions are dropped (main's
    // strict_format): running them would teach the policy the other sections are optional.
    const actions = this.config.strict_format && isWmFormat(this.config.prompt_format) && !parsed.format_correct ? [] : parsed.actions;
    let actionIsValid = actions.length > 0 && parsed.format_correct;
    let success = false;
    let done = false;
    let reward = 0;

    for (const action of actions) {
      if (!ACTION_SET.has(action)) {
        actionIsValid = false;
        break;
      }
      const move = applyMove(room, this.player, action as SokobanAction);
      if (move.moved) this.player = room.state.indexOf(CELL.player);
      if (this.rewards.useGymReward) reward += move.gymReward;
      validActions.push(action as SokobanAction);
      if (allBoxesOnTarget(room)) {
        done = true;
        success = true;
        reward += this.rewards.successReward;
        break;
      }
    }

    if (this.earnsFormatReward(parsed, validActions, actionIsValid)) reward += this.rewards.formatReward;
    this.totalReward += reward;
    this.solved = success;

    const turn = { actionIsValid, actionIsEffective: this.player !== startPlayer, success };
    const info = { ...stepInfo(parsed, turn, this.groundTruth(), validActions), state_key: this.stateKey() };
    return { obs: this.observe(validActions), reward, done, info };
  }

  async systemPrompt(): Promise<Observation> {
    const c = this.config;
    return { text: sokobanSystemPrompt(c.prompt_format, c.max_actions_per_step, c.action_sep, c.use_example_in_sys_prompt), images: [] };
  }

  async close(): Promise<void> {
    this.room = null;
  }

  /**
   * The env state as a string (every cell's content, player and boxes included): equal
   * keys are the same state whatever the turn or the route there (GiGPO's anchor states).
   */
  private stateKey(): string {
    const room = this.requireRoom();
    return `${room.width}x${room.height}:${Buffer.from(room.state).toString("hex")}`;
  }

  /** The current room (read-only use), e.g. for solvers and renderers. */
  get currentRoom(): SokobanRoom | null {
    return this.room;
  }

  /**
   * A step after the room was solved: nothing moves and nothing is paid (VAGEN pays the
   * success reward again here, since every box still stands on a target); the episode
   * stays done and successful.
   */
  private stepAfterSolved(parsed: ParsedResponse): StepResult {
    const turn = { actionIsValid: false, actionIsEffective: false, success: true };
    const info = { ...stepInfo(parsed, turn, this.groundTruth(), []), after_done: true };
    return { obs: this.observe([]), reward: 0, done: true, info };
  }

  private async generateLevel(seed: number): Promise<Level> {
    const c = this.config;
    const [height, width] = c.dim_room;
    try {
      return await finishCooperatively(
        levelWork(seed, {
          height,
          width,
          numBoxes: c.num_boxes,
          solutionRange: c.min_solution_steps,
          maxTries: c.reset_seed_max_tries,
          bfsMaxDepth: c.min_solution_bfs_max_depth,
          bfsMaxStates: c.min_solution_bfs_max_states,
          maxStates: c.max_generation_states,
        }),
      );
    } catch (err) {
      if (err instanceof LevelGenerationError) throw this.generationFailure(err);
      throw err;
    }
  }

  private generationFailure(err: LevelGenerationError): VagenError {
    const c = this.config;
    const limit = err.limit === "maxStates" ? `max_generation_states=${c.max_generation_states}` : `reset_seed_max_tries=${c.reset_seed_max_tries}`;
    return new VagenError(
      `Sokoban: could not generate a level with dim_room=[${c.dim_room.join(",")}], num_boxes=${c.num_boxes} ` +
        `in ${err.tries} tries, ${err.statesSearched} states searched (${limit}); last failure: ${err.lastFailure}`,
      "use fewer boxes or a bigger room, or raise the limit",
    );
  }

  private earnsFormatReward(parsed: ParsedResponse, validActions: readonly string[], actionIsValid: boolean): boolean {
    if (this.rewards.formatRewardRule === "any_action_executed") return validActions.length > 0;
    return actionIsValid && parsed.format_correct;
  }

  private observe(validActions: readonly string[] | null): Observation {
    const room = this.requireRoom();
    const vision = this.config.render_mode === "vision";
    const body = vision ? this.config.image_placeholder : renderText(room);
    const text = validActions === null ? initialObservationText(body) : actionObservationText(validActions, body);
    return { text, images: vision ? [this.images.render(room)] : [] };
  }

  private groundTruth(): GridState {
    return sokobanGridState(this.requireRoom(), this.player);
  }

  private requireRoom(): SokobanRoom {
    if (!this.room) throw new Error("Sokoban: call reset(seed) before step() or rendering");
    return this.room;
  }
}
