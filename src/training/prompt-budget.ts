/**
 * The prompt budget, checked before the first step: an env spec whose first prompt
 * (system + first observation, as the model sees it) is longer than
 * data.max_prompt_length would have every episode dropped at step 1, after the model
 * loaded and a whole rollout ran. One episode of each spec is reset and measured here.
 */
import { VagenError } from "../core/errors.ts";
import type { Env } from "../../envs/_common/types.ts";
import { observationToMessage } from "../harness/observation.ts";
import type { PromptBuilder } from "../models/index.ts";

export interface PromptBudgetCheck {
  /** Names the spec in messages (`file: key "data.train.<tag>"`). */
  key: string;
  seed: number;
  create: () => Promise<Env>;
}

/** Throws naming the spec when its first prompt does not fit `maxPromptLength` tokens. */
export async function checkPromptBudget(specs: readonly PromptBudgetCheck[], prompts: Pick<PromptBuilder, "buildPrompt">, maxPromptLength: number): Promise<void> {
  for (const spec of specs) {
    const env = await spec.create();
    let length: number;
    try {
      // reset first: a remote env knows its system prompt only once an episode exists
      const { obs } = await env.reset(spec.seed);
      const system = await env.systemPrompt();
      length = prompts.buildPrompt([observationToMessage("system", system), observationToMessage("user", obs)]).tokenIds.length;
    } finally {
      await env.close();
    }
    if (length > maxPromptLength) {
      throw new VagenError(
        `${spec.key}: the first prompt (seed ${spec.seed}) is ${length} tokens, more than data.max_prompt_length (${maxPromptLength}): every episode would be dropped`,
        `raise data.max_prompt_length to at least ${length}, or shorten the env's prompt`,
      );
    }
  }
}
