/**
 * The seam between the scheduler (plain TypeScript: queues, slots, stop rules) and the
 * tensor side (model forward, KV cache, sampling on the device).
 *
 * The scheduler decides *what* runs in each step; a StepRunner runs it and hands back
 * one sampled token per sequence that asked for one. Keeping tensors behind this seam
 * lets the scheduler be tested on its own and lets another runner (several GPUs, a
 * different cache layout) slot in without touching it.
 */
import type { Prompt, SamplingOptions } from "./types.ts";

/** The part of a request's sampling options the device needs. */
export interface TokenSampling extends Pick<SamplingOptions, "temperature" | "topP" | "topK" | "seed"> {
  /** Also copy the logits row to the host (tests, debugging). */
  returnLogits: boolean;
}

export interface SequenceStart {
  /** Unique for the life of the engine. */
  seqId: number;
  slot: number;
  prompt: Prompt;
  /** Prompt tokens [0, cached) already have KV in the slot; prefill starts here. */
  cached: number;
  sampling: TokenSampling;
}

/** Part of a sequence's pending prompt to prefill in this step. */
export interface PrefillChunk {
  seqId: number;
  /** Prompt token range [start, end) to run; KV for [0, start) is already in the slot. */
  start: number;
  end: number;
  /** The last chunk of the prompt: sample the first generated token from its last position. */
  sample: boolean;
}

export interface DecodeItem {
  seqId: number;
  /** The token to feed (the one sampled last). */
  tokenId: number;
  /** Its index in the sequence (= the number of tokens whose KV is already cached). */
  index: number;
}

/** A decode item whose token may still be on the device (see StepRunner.launchDecode). */
export interface LaunchItem {
  seqId: number;
  /** The token to feed, or undefined: the one the last launched step samples for this sequence. */
  tokenId?: number;
  index: number;
}

/** A launched decode step whose tokens have not been read yet. */
export interface PendingDecode {
  /** Waits for the step and returns its tokens (once). */
  collect(): SampledToken[];
}

export interface SampledToken {
  seqId: number;
  tokenId: number;
  logprob: number;
  logits?: Float32Array;
}

export interface RunnerCapacity {
  /** Number of KV slots (sequences and idle sessions that can hold a cache at once). */
  slots: number;
  /** Tokens one slot can hold (prompt + generated). */
  slotTokens: number;
  vocabSize: number;
}

export interface StepRunner {
  readonly capacity: RunnerCapacity;
  /** Prepare a sequence (embed its new prompt tokens, run the vision tower once per new image). */
  begin(start: SequenceStart): void;
  /** Run prompt chunks of several sequences; returns tokens for the chunks with `sample`. */
  prefill(chunks: PrefillChunk[]): SampledToken[];
  /** Feed one token for each sequence and sample the next. */
  decode(items: DecodeItem[]): SampledToken[];
  /**
   * Optional (device runners): queue a decode step and return without waiting for its
   * tokens, so the scheduler can queue the next step before reading this one and the
   * device never idles while the host handles tokens. An item without `tokenId` feeds
   * the token the previously launched step samples for its sequence, read on the device.
   * Steps must be collected in launch order.
   */
  launchDecode?(items: LaunchItem[]): PendingDecode;
  /** The sequence is done (or failed): free anything the runner holds for it. */
  end(seqId: number): void;
  /** Free everything (the cache, compiled graphs). */
  dispose(): void;
}
