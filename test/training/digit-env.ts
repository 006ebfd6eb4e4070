/**
 * A one-turn env the tiny fixture policy can learn within a CI test: the observation asks
 * for a digit, and the episode succeeds when the reply starts with one. A random policy
 * over the fixture's 368-token vocabulary succeeds a few percent of the time; a trained
 * one nearly always. (Tasks that need the policy to condition on the observation, such
 * as answering "even" or "odd" by the parity of a character, take the 2-layer, 64-wide
 * fixture far longer than a test may run.)
 */
import type { Env, EnvInfo, Observation, StepResult } from "../../envs/_common/types.ts";

export class DigitEnv implements Env {
  constructor(_config: Record<string, unknown> = {}) {}

  async reset(_seed: number): Promise<{ obs: Observation; info: EnvInfo }> {
    return { obs: { text: "Reply with a digit.", images: [] }, info: {} };
  }

  async step(response: string): Promise<StepResult> {
    const success = /^[0-9]/.test(response);
    return { obs: { text: success ? "yes" : "no", images: [] }, reward: success ? 1 : 0, done: true, info: { success } };
  }

  async systemPrompt(): Promise<Observation> {
    return { text: "You answer in one character.", images: [] };
  }

  async close(): Promise<void> {}
}
