/**
 * Solver demonstrations in the thinking formats: Sokoban's world-model replies state the
 * true state before and after the turn in words the env's own scorer reads (exact parser,
 * main's grouped F1: 1.0 on every section without noise, 1 - noise / 2 on average with
 * it), the env accepts every reply as well-formed and runs its move, and free_think
 * replies carry the solver's plan. Formats the solver cannot write are refused by key.
 */
import { describe, expect, test } from "bun:test";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { SOKOBAN_STATE_REWARD_SPEC } from "../../envs/sokoban/state-reward-spec.ts";
import { StateRewardConfig } from "../../src/rewards/config.ts";
import { StateRewardScorer, type TurnInput } from "../../src/rewards/state-reward.ts";
import type { SolverDataConfig } from "../../src/sft/config.ts";
import { solverEpisodes, type Episode } from "../../src/sft/episodes.ts";
import * as v from "valibot";

const levels = { dim_room: [6, 6], num_boxes: 1, min_solution_steps: [1, 5], max_actions_per_step: 1, render_mode: "text" };

function solverConfig(format: string, noise: number, overrides: Partial<SolverDataConfig> = {}): SolverDataConfig {
  return {
    env: "Sokoban",
    config: { ...levels, prompt_format: format },
    episodes: 30,
    seed_start: 700,
    max_turns: 8,
    random_action_prob: 0.1,
    random_moves: "any",
    actions_per_turn: 1,
    careless_episode_prob: 0,
    state_noise_prob: noise,
    ...overrides,
  };
}

/** Replays each episode's replies in a fresh env: the turns the scorer reads, and whether the env took every reply as well-formed. */
async function replay(config: SolverDataConfig, episodes: readonly Episode[]): Promise<{ turns: TurnInput[]; formatCorrect: boolean[]; success: boolean[] }> {
  const turns: TurnInput[] = [];
  const formatCorrect: boolean[] = [];
  const success: boolean[] = [];
  for (const [i, episode] of episodes.entries()) {
    const env = new SokobanEnv(config.config);
    let state = (await env.reset(config.seed_start + i)).info.state;
    let solved = false;
    for (const response of episode.replies) {
      const step = await env.step(response);
      turns.push({ response, stateBefore: state, stateAfter: step.info.state });
      formatCorrect.push((step.info.metrics as { turn_metrics?: { format_correct?: boolean } } | undefined)?.turn_metrics?.format_correct === true);
      state = step.info.state;
      solved = step.info.success === true;
    }
    success.push(solved);
    await env.close();
  }
  return { turns, formatCorrect, success };
}

const scorer = new StateRewardScorer(
  v.parse(StateRewardConfig, {
    state_estimation: { enable: true, reward: 1 },
    transition_prediction: { enable: true, reward: 1 },
    scorer: "exact",
  }),
  SOKOBAN_STATE_REWARD_SPEC,
  null,
);

async function qualities(noise: number): Promise<{ perception: number[]; prediction: number[]; formatCorrect: boolean[]; success: boolean[]; episodes: Episode[] }> {
  const config = solverConfig("wm", noise);
  const episodes = await solverEpisodes(config, { seed: 0 });
  const { turns, formatCorrect, success } = await replay(config, episodes);
  const scored = await scorer.scoreTurns(turns);
  for (const turn of scored) expect(turn.gate).toBe("ok");
  const quality = (section: string) => scored.map((t) => t.sections.find((s) => s.section === section)!.quality!);
  return { perception: quality("state_estimation"), prediction: quality("transition_prediction"), formatCorrect, success, episodes };
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("world-model demonstrations (Sokoban wm)", () => {
  test("without noise, every perception and prediction scores 1.0 under the env's exact scorer, and the env runs every reply", async () => {
    const { perception, prediction, formatCorrect, success, episodes } = await qualities(0);
    expect(perception.length).toBeGreaterThan(60);
    expect(perception.every((q) => q === 1)).toBe(true);
    expect(prediction.every((q) => q === 1)).toBe(true);
    expect(formatCorrect.every(Boolean)).toBe(true);
    // The replays reach what the episodes recorded: the replies are what the env was sent.
    expect(success).toEqual(episodes.map((e) => e.success));
    expect(success.filter(Boolean).length).toBeGreaterThan(episodes.length / 2);
  });

  test("with noise p, a section's F1 is 1 - p/2 on average (one axis of a misplaced object is wrong), and reproducible", async () => {
    const noise = 0.4;
    const { perception, prediction, episodes } = await qualities(noise);
    const all = [...perception, ...prediction];
    expect(all.length).toBeGreaterThan(120);
    // 0.8 expected; the standard error of the mean over ~200 sections is ~0.02.
    expect(mean(all)).toBeGreaterThan(1 - noise / 2 - 0.06);
    expect(mean(all)).toBeLessThan(1 - noise / 2 + 0.06);
    // Each section is 1, 0.75 or 0.5 (neither, one or both objects misplaced on one axis).
    expect(all.every((q) => [1, 0.75, 0.5].includes(q))).toBe(true);
    expect(all.some((q) => q < 1)).toBe(true);
    const again = await solverEpisodes(solverConfig("wm", noise), { seed: 0 });
    expect(again.map((e) => e.replies)).toEqual(episodes.map((e) => e.replies));
    // The noise has its own random stream: the moves are those of the noiseless solver.
    const moves = (eps: readonly Episode[]) => eps.map((e) => e.replies.map((r) => /<answer>(\w+)<\/answer>/.exec(r)![1]));
    expect(moves(again)).toEqual(moves(await solverEpisodes(solverConfig("wm", 0), { seed: 0 })));
  });
});

describe("free_think demonstrations", () => {
  test("each reply is the solver's plan in a <think>, then the answer: its first move unless the move was random", async () => {
    const config = solverConfig("free_think", 0, { random_action_prob: 0 });
    const episodes = await solverEpisodes(config, { seed: 0 });
    const { formatCorrect, success } = await replay(config, episodes);
    expect(formatCorrect.every(Boolean)).toBe(true);
    expect(success.every(Boolean)).toBe(true);
    for (const episode of episodes) {
      for (const reply of episode.replies) {
        const match = /^<think>Plan: ((?:Up|Down|Left|Right)(?:, (?:Up|Down|Left|Right)){0,3})\.<\/think><answer>(Up|Down|Left|Right)<\/answer>$/.exec(reply);
        expect(match).not.toBeNull();
        expect(match![1]!.split(", ")[0]).toBe(match![2]!);
      }
      // The plan shrinks by one move a turn as the solver follows it (the last plans name every move left).
      const planLengths = episode.replies.map((r) => /Plan: ([^.]*)\./.exec(r)![1]!.split(", ").length);
      expect(planLengths.at(-1)).toBe(1);
    }
  });
});

describe("formats the solver cannot write", () => {
  test("are refused naming the key", async () => {
    await expect(solverEpisodes(solverConfig("grounding", 0, { episodes: 1 }), { seed: 0 })).rejects.toThrow(/data\.solver\.config\.prompt_format.*grounding/);
    await expect(
      solverEpisodes({ ...solverConfig("wm", 0, { episodes: 1 }), env: "FrozenLake", config: { size: 3, prompt_format: "wm", render_mode: "text" } }, { seed: 0 }),
    ).rejects.toThrow(/data\.solver\.config\.prompt_format.*wm/);
    await expect(solverEpisodes(solverConfig("no_think", 0.2, { episodes: 1 }), { seed: 0 })).rejects.toThrow(/data\.solver\.state_noise_prob/);
  });
});
