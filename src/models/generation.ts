/**
 * A simple, family-independent generation loop over the `ChatModel` seam: prefill a
 * batch of prompts, then sample one token per row per step with a KV cache until every
 * row has produced an end-of-sequence token or its budget. The fast batched engine is a
 * separate component; this loop is the reference it is checked against.
 */
import type { ChatModel, PromptInput } from "./family.ts";
import { SeededRandom, sampleToken, type SamplingOptions } from "./sampling.ts";

export interface GenerateOptions extends SamplingOptions {
  maxTokens: number;
  seed: number;
  /** Stop ids; defaults to the model's end-of-sequence ids. */
  stopTokenIds?: readonly number[];
}

export interface Generation {
  text: string;
  tokenIds: number[];
  logprobs: number[];
  finishReason: "stop" | "length";
}

export function generate(model: ChatModel, prompts: readonly PromptInput[], opts: GenerateOptions): Generation[] {
  const stop = new Set(opts.stopTokenIds ?? model.eosTokenIds);
  const rng = new SeededRandom(opts.seed);
  const rows = prompts.map(() => ({ tokenIds: [] as number[], logprobs: [] as number[], done: false, finish: "length" as Generation["finishReason"] }));
  if (opts.maxTokens > 0 && prompts.length > 0) {
    const session = model.startDecoding(prompts);
    try {
      for (let step = 0; step < opts.maxTokens; step++) {
        const logits = session.nextLogits();
        const next: number[] = [];
        rows.forEach((row, b) => {
          if (row.done) {
            next.push(session.padTokenId);
            return;
          }
          const { token, logprob } = sampleToken(logits[b]!, opts, rng);
          row.tokenIds.push(token);
          row.logprobs.push(logprob);
          if (stop.has(token)) {
            row.done = true;
            row.finish = "stop";
          }
          next.push(token);
        });
        if (rows.every((r) => r.done) || step === opts.maxTokens - 1) break;
        // Rows that are done keep a slot in the batch, masked out of attention.
        session.append(next, rows.map((r) => !r.done));
      }
    } finally {
      session.dispose();
    }
  }
  return rows.map((r) => ({
    text: model.tokenizer.decode(r.tokenIds.filter((t) => !stop.has(t)), { skipSpecialTokens: true }),
    tokenIds: r.tokenIds,
    logprobs: r.logprobs,
    finishReason: r.finish,
  }));
}
