/**
 * DigitEnv (test/training/digit-env.ts) gone bad on purpose, by config:
 *   fail_seeds_from: N   step() throws for seeds >= N (an env outage)
 *   reward: nan | inf | huge | string   the reward step() returns
 */
import type { Env, EnvInfo, Observation, StepResult } from "../../envs/_common/types.ts";

export class FlakyEnv implements Env {
  #seed = 0;
  constructor(private readonly config: { fail_seeds_from?: number; reward?: string } = {}) {}

  async reset(seed: number): Promise<{ obs: Observation; info: EnvInfo }> {
    this.#seed = seed;
    return { obs: { text: "Reply with a digit.", images: [] }, info: {} };
  }

  async step(response: string): Promise<StepResult> {
    if (this.config.fail_seeds_from !== undefined && this.#seed >= this.config.fail_seeds_from) throw new Error(`FlakyEnv refuses seed ${this.#seed}`);
    const success = /^[0-9]/.test(response);
    const rewards: Record<string, unknown> = { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, huge: 1e12, string: "1" };
    const reward = (this.config.reward ? rewards[this.config.reward] : success ? 1 : 0) as number;
    return { obs: { text: success ? "yes" : "no", images: [] }, reward, done: true, info: { success } };
  }

  async systemPrompt(): Promise<Observation> {
    return { text: "You answer in one character.", images: [] };
  }

  async close(): Promise<void> {}
}
