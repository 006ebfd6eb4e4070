/**
 * The generation engine: continuous batching over a StepRunner.
 *
 * Requests arrive at any time (every live episode's turn is one request). A single async
 * loop repeatedly (1) admits waiting requests into free KV slots, reusing a session's
 * slot and the part of its cached KV that matches the new prompt, (2) runs one prefill
 * step for a batch of pending prompts (long prompts in chunks, under a token budget) and
 * (3) runs one decode step for every sequence that is generating. Between steps it
 * yields to the event loop, so new requests join the very next step: prefill and decode
 * interleave and nobody waits for a whole batch to finish.
 *
 * With a runner that can launch steps without waiting (`launchDecode`), decode steps
 * overlap: step k + 1 is queued, its tokens fed from step k's on the device, before the
 * host reads step k's tokens, checks stop rules and streams them. A sequence that turns
 * out to have finished at step k wastes its row of step k + 1, whose token is dropped and
 * whose KV write lands past what its slot keeps.
 */
import { VagenError } from "../core/errors.ts";
import { EngineEventHub, type EngineEventListener } from "./events.ts";
import { sharedPrefixLength, validatePrompt } from "./prompt.ts";
import { SlotPool, type SlotLease } from "./slots.ts";
import { IncrementalDetokenizer, StopStringMatcher, type DecodeFn, type TokenBytesFn } from "./stop.ts";
import type { DecodeItem, LaunchItem, PendingDecode, PrefillChunk, SampledToken, StepRunner } from "./step-runner.ts";
import type {
  EngineStats,
  FinishReason,
  GenerateRequest,
  GenerationResult,
  SamplingOptions,
} from "./types.ts";

export interface EngineOptions {
  /** Ids to text, with special tokens skipped (used for stop strings and streamed text). */
  decode: DecodeFn;
  /**
   * Per-id UTF-8 bytes of that same decode, where the tokenizer is byte-level: streamed
   * text then costs a table lookup per token instead of two window decodes.
   */
  tokenBytes?: TokenBytesFn;
  /** Always stop on these ids (the model's end-of-turn / end-of-text ids). */
  eosTokenIds?: number[];
  /** Defaults for fields a request leaves out. */
  defaultSampling?: Partial<SamplingOptions>;
  /** Most prompt tokens (counting padding) one prefill step runs. */
  maxPrefillTokens?: number;
  /** Most sequences generating at once (at most the number of slots). */
  maxRunning?: number;
  /**
   * Prefill batching, as text-generation-inference's `max_waiting_tokens` and
   * `waiting_served_ratio`: while sequences are decoding, prompts that are ready wait until
   * the oldest has waited this many scheduler steps, or they number at least
   * `prefillWaitRatio` x the decoding sequences. A prefill call of a small model costs
   * about the same whatever it holds (its kernel launches, not its arithmetic), and in a
   * multi-turn rollout the episodes' turns end a few at a time, so without it nearly every
   * decode step came with a prefill call of one to four prompts. Unset or 0: every ready
   * prompt is prefilled at the next step. With no sequence decoding there is nothing to
   * wait for and prompts are prefilled at once either way.
   */
  prefillMaxWaitSteps?: number;
  /** See `prefillMaxWaitSteps` (unset: DEFAULT_PREFILL_WAIT_RATIO). */
  prefillWaitRatio?: number;
}

/** Ready prompts against decoding sequences at which prefill batching stops waiting. */
export const DEFAULT_PREFILL_WAIT_RATIO = 0.25;

const BASE_SAMPLING: SamplingOptions = {
  temperature: 1,
  topP: 1,
  topK: 0,
  maxNewTokens: 256,
  stopTokenIds: [],
  stopStrings: [],
  ignoreStopTokens: false,
};

interface Sequence {
  seqId: number;
  request: GenerateRequest;
  sampling: SamplingOptions;
  stopIds: Set<number>;
  lease: SlotLease;
  promptLength: number;
  cached: number;
  /** Prompt tokens whose KV is in the slot (prefill progress). */
  prefilled: number;
  decoding: boolean;
  /** Tokens whose KV is in the slot: prompt + generated tokens already fed back. */
  kvLength: number;
  /** A launched decode step will sample this sequence's next token (not yet read). */
  pendingToken: boolean;
  /** Completed or failed: tokens still arriving from launched steps are dropped. */
  finished: boolean;
  /** The scheduler step at which its prompt was ready to prefill (prefill batching's clock). */
  readyAtStep: number;
  tokenIds: number[];
  logprobs: number[];
  logits?: Float32Array[];
  /** Text is followed token by token (stop strings or a streaming caller need it). */
  incrementalText: boolean;
  detokenizer: IncrementalDetokenizer;
  stops: StopStringMatcher;
  resolve: (r: GenerationResult) => void;
  reject: (e: unknown) => void;
  onAbort?: () => void;
}

interface Waiting {
  request: GenerateRequest;
  sampling: SamplingOptions;
  resolve: (r: GenerationResult) => void;
  reject: (e: unknown) => void;
  onAbort?: () => void;
}

export class Engine {
  private readonly pool: SlotPool;
  private readonly waiting: Waiting[] = [];
  private readonly prefilling: Sequence[] = [];
  private readonly decoding: Sequence[] = [];
  private readonly defaults: SamplingOptions;
  private readonly maxPrefillTokens: number;
  private readonly maxRunning: number;
  private nextSeqId = 1;
  /** The launched decode step whose tokens are not read yet, and who was in it. */
  private inflight: { members: Sequence[]; pending: PendingDecode } | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** True from the moment a loop is started until it has seen there is no work left. */
  private looping = false;
  private closed = false;
  private readonly events = new EngineEventHub();
  /** Scheduler steps run so far (the clock prefill batching waits by). */
  private steps = 0;
  private readonly counters = {
    prefillTokens: 0,
    cachedPromptTokens: 0,
    decodeTokens: 0,
    prefillSteps: 0,
    decodeSteps: 0,
  };

  constructor(
    private readonly runner: StepRunner,
    private readonly options: EngineOptions,
  ) {
    const cap = runner.capacity;
    this.pool = new SlotPool(cap.slots);
    this.defaults = { ...BASE_SAMPLING, ...options.defaultSampling };
    this.maxPrefillTokens = Math.max(1, options.maxPrefillTokens ?? 8192);
    this.maxRunning = Math.max(1, Math.min(options.maxRunning ?? cap.slots, cap.slots));
  }

  get capacity() {
    return this.runner.capacity;
  }

  /** Generate a completion. Rejects with an AbortError if `request.signal` aborts it. */
  generate(request: GenerateRequest): Promise<GenerationResult> {
    if (this.closed) return Promise.reject(new VagenError("the generation engine is closed"));
    const problem = validatePrompt(request.prompt, this.runner.capacity.vocabSize);
    if (problem) return Promise.reject(new VagenError(`invalid prompt: ${problem}`));
    const slotTokens = this.runner.capacity.slotTokens;
    if (request.prompt.tokenIds.length >= slotTokens) {
      return Promise.reject(
        new VagenError(
          `the prompt has ${request.prompt.tokenIds.length} tokens but a KV slot holds ${slotTokens} (prompt + generated)`,
          "raise the engine's max sequence length or shorten the conversation",
        ),
      );
    }
    let sampling: SamplingOptions;
    try {
      sampling = this.resolveSampling(request.sampling);
    } catch (e) {
      return Promise.reject(e);
    }
    if (request.signal?.aborted) return Promise.reject(abortError());
    return new Promise<GenerationResult>((resolve, reject) => {
      const entry: Waiting = { request, sampling, resolve, reject };
      if (request.signal) {
        entry.onAbort = () => this.abortWaiting(entry);
        request.signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      this.waiting.push(entry);
      this.ensureLoop();
    });
  }

  /** Forget a session and free its KV slot (after its running turn, if one is running). */
  releaseSession(sessionId: string): void {
    this.pool.release(sessionId);
    this.ensureLoop(); // a freed slot may let a waiting request in
  }

  /** Watch the engine (events.ts); the returned function stops watching. */
  subscribe(listener: EngineEventListener): () => void {
    return this.events.subscribe(listener);
  }

  stats(): EngineStats {
    return {
      ...this.counters,
      evictions: this.pool.evictions,
      runningSequences: this.prefilling.length + this.decoding.length,
      waitingRequests: this.waiting.length,
      idleSessions: this.pool.idleSessions,
      freeSlots: this.pool.freeSlots,
    };
  }

  /** Stop the loop, fail whatever is pending, and free the runner's memory. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    await this.loop;
    if (this.inflight) {
      // Its sequences fail below; the step only has to finish and free what it holds.
      const { pending } = this.inflight;
      this.inflight = undefined;
      try {
        pending.collect();
      } catch {
        // nothing waits for these tokens
      }
    }
    const err = new VagenError("the generation engine was closed");
    for (const w of this.waiting.splice(0)) this.settleWaiting(w, err);
    for (const s of [...this.prefilling, ...this.decoding]) this.fail(s, err);
    this.runner.dispose();
  }

  private resolveSampling(given: Partial<SamplingOptions> | undefined): SamplingOptions {
    const s: SamplingOptions = { ...this.defaults };
    for (const [k, v] of Object.entries(given ?? {})) if (v !== undefined) (s as unknown as Record<string, unknown>)[k] = v;
    const bad = (what: string) => new VagenError(`invalid sampling option: ${what}`);
    if (!(s.temperature >= 0)) throw bad(`temperature must be >= 0, got ${s.temperature}`);
    if (!(s.topP > 0 && s.topP <= 1)) throw bad(`topP must be in (0, 1], got ${s.topP}`);
    if (!(Number.isInteger(s.topK) && s.topK >= 0)) throw bad(`topK must be an integer >= 0, got ${s.topK}`);
    if (!(Number.isInteger(s.maxNewTokens) && s.maxNewTokens >= 1)) throw bad(`maxNewTokens must be an integer >= 1, got ${s.maxNewTokens}`);
    return s;
  }

  private ensureLoop(): void {
    if (this.wake) {
      const w = this.wake;
      this.wake = undefined;
      w();
    }
    if (!this.looping) {
      this.looping = true;
      this.loop = this.run();
    }
  }

  /**
   * The scheduler loop. `looping` is cleared synchronously right after the last check
   * for work (no await in between), so a request submitted at any moment either is seen
   * by this loop or starts a new one, and two loops never run at once.
   */
  private async run(): Promise<void> {
    // Requests submitted in the same tick (a batch of episodes) join the first step.
    await new Promise<void>((r) => setImmediate(r));
    while (!this.closed) {
      this.admit();
      if (this.prefilling.length === 0 && this.decoding.length === 0) {
        if (this.waiting.length === 0) break; // idle: the next generate() starts a new loop
        // Waiting requests but no free slot yet: sleep until a slot is released.
        await new Promise<void>((r) => (this.wake = r));
        continue;
      }
      try {
        if (this.prefilling.length > 0 && this.prefillDue()) this.prefillStep();
        if (this.decoding.length > 0) this.decodeStep();
        this.steps++;
      } catch (e) {
        // A scheduler bug must not leave callers waiting forever: fail what is running.
        for (const seq of [...this.prefilling, ...this.decoding]) this.fail(seq, e);
      }
      if (this.events.active) this.events.emit({ type: "step", stats: this.stats() });
      // Let callbacks, new requests and HTTP handlers run before the next step.
      await new Promise<void>((r) => setImmediate(r));
    }
    this.looping = false;
  }

  /** Move waiting requests into slots, in arrival order, while slots and room allow. */
  private admit(): void {
    for (let i = 0; i < this.waiting.length && this.prefilling.length + this.decoding.length < this.maxRunning; ) {
      const w = this.waiting[i]!;
      const sessionId = w.request.sessionId;
      if (sessionId !== undefined && this.pool.isBusy(sessionId)) {
        i++; // this session's previous turn is still running
        continue;
      }
      const lease = this.pool.acquire(sessionId);
      if (!lease) return; // no slot free: keep arrival order
      this.waiting.splice(i, 1);
      if (w.onAbort) w.request.signal?.removeEventListener("abort", w.onAbort);
      this.start(w, lease);
    }
  }

  private start(w: Waiting, lease: SlotLease): void {
    const prompt = w.request.prompt;
    const n = prompt.tokenIds.length;
    const shared = sharedPrefixLength(lease.contents.tokens, lease.contents.images, prompt);
    if (w.request.continuesSession && shared < lease.contents.tokens.length) {
      this.pool.finish(lease, { tokens: [], images: [] });
      if (lease.sessionId !== undefined) this.pool.release(lease.sessionId);
      w.reject(
        new VagenError(
          `session ${JSON.stringify(lease.sessionId)}: the prompt does not continue the session's ${lease.contents.tokens.length} cached tokens (they differ from token ${shared} on)`,
          "a continuing request must send the previous prompt and every sampled id unchanged, then the new tokens",
        ),
      );
      return;
    }
    // The last prompt token always runs, since its logits give the first new token.
    const cached = Math.min(shared, n - 1);
    const stopIds = new Set<number>(w.sampling.ignoreStopTokens ? [] : [...(this.options.eosTokenIds ?? []), ...w.sampling.stopTokenIds]);
    const seq: Sequence = {
      seqId: this.nextSeqId++,
      request: w.request,
      sampling: w.sampling,
      stopIds,
      lease,
      promptLength: n,
      cached,
      prefilled: cached,
      decoding: false,
      kvLength: cached,
      pendingToken: false,
      finished: false,
      readyAtStep: this.steps,
      tokenIds: [],
      logprobs: [],
      logits: w.request.returnLogits ? [] : undefined,
      incrementalText: w.sampling.stopStrings.length > 0 || w.request.onToken !== undefined,
      detokenizer: new IncrementalDetokenizer(this.options.decode, this.options.tokenBytes),
      stops: new StopStringMatcher(w.sampling.stopStrings),
      resolve: w.resolve,
      reject: w.reject,
    };
    if (w.request.signal) {
      seq.onAbort = () => this.abortRunning(seq);
      w.request.signal.addEventListener("abort", seq.onAbort, { once: true });
    }
    try {
      this.runner.begin({
        seqId: seq.seqId,
        slot: lease.slot,
        prompt,
        cached,
        sampling: {
          temperature: w.sampling.temperature,
          topP: w.sampling.topP,
          topK: w.sampling.topK,
          seed: w.sampling.seed,
          returnLogits: w.request.returnLogits ?? false,
        },
      });
    } catch (e) {
      this.fail(seq, e);
      return;
    }
    this.counters.cachedPromptTokens += cached;
    this.prefilling.push(seq);
  }

  /** Whether the ready prompts are prefilled this step (prefill batching, EngineOptions). */
  private prefillDue(): boolean {
    const maxWait = this.options.prefillMaxWaitSteps ?? 0;
    if (maxWait <= 0 || this.decoding.length === 0) return true;
    if (this.prefilling.length >= (this.options.prefillWaitRatio ?? DEFAULT_PREFILL_WAIT_RATIO) * this.decoding.length) return true;
    let oldest = Infinity;
    for (const seq of this.prefilling) {
      // A long prompt whose first chunks ran is finished without waiting again.
      if (seq.prefilled > seq.cached) return true;
      oldest = Math.min(oldest, seq.readyAtStep);
    }
    return this.steps - oldest >= maxWait;
  }

  /** One prefill step: chunks of pending prompts, padded cost within the token budget. */
  private prefillStep(): void {
    const chunks: PrefillChunk[] = [];
    const members: Sequence[] = [];
    let longest = 0;
    for (const seq of this.prefilling) {
      const remaining = seq.promptLength - seq.prefilled;
      const len = Math.min(remaining, this.maxPrefillTokens);
      const newLongest = Math.max(longest, len);
      if (members.length > 0 && newLongest * (members.length + 1) > this.maxPrefillTokens) break;
      longest = newLongest;
      const end = seq.prefilled + len;
      chunks.push({ seqId: seq.seqId, start: seq.prefilled, end, sample: end === seq.promptLength });
      members.push(seq);
    }
    let sampled: SampledToken[];
    try {
      sampled = this.runner.prefill(chunks);
    } catch (e) {
      for (const seq of members) this.fail(seq, e);
      return;
    }
    this.counters.prefillSteps++;
    const bySeq = new Map(sampled.map((t) => [t.seqId, t]));
    for (let i = 0; i < members.length; i++) {
      const seq = members[i]!;
      const chunk = chunks[i]!;
      this.counters.prefillTokens += chunk.end - chunk.start;
      seq.prefilled = chunk.end;
      seq.kvLength = chunk.end;
      if (!chunk.sample) continue;
      this.prefilling.splice(this.prefilling.indexOf(seq), 1);
      seq.decoding = true;
      this.decoding.push(seq);
      const token = bySeq.get(seq.seqId);
      if (!token) this.fail(seq, new Error(`the runner returned no token for sequence ${seq.seqId}`));
      else this.accept(seq, token);
    }
  }

  /** One decode step for every generating sequence. */
  private decodeStep(): void {
    if (this.runner.launchDecode) {
      this.overlappedDecodeStep();
      return;
    }
    const members = this.decoding.slice();
    const items: DecodeItem[] = members.map((seq) => ({
      seqId: seq.seqId,
      tokenId: seq.tokenIds[seq.tokenIds.length - 1]!,
      index: seq.kvLength,
    }));
    let sampled: SampledToken[];
    try {
      sampled = this.runner.decode(items);
    } catch (e) {
      for (const seq of members) this.fail(seq, e);
      return;
    }
    this.counters.decodeSteps++;
    this.acceptStep(members, sampled);
  }

  /**
   * Launches the next decode step, then reads the one launched before it. A sequence in
   * that earlier step feeds its not-yet-read token on the device, one position further.
   * It sits the new step out when that token is already its last (max new tokens) or
   * would not fit the slot: reading it will finish the sequence either way.
   */
  private overlappedDecodeStep(): void {
    const previous = this.inflight;
    this.inflight = undefined;
    const slotTokens = this.runner.capacity.slotTokens;
    const members: Sequence[] = [];
    const items: LaunchItem[] = [];
    for (const seq of this.decoding) {
      if (!seq.pendingToken) {
        items.push({ seqId: seq.seqId, tokenId: seq.tokenIds[seq.tokenIds.length - 1]!, index: seq.kvLength });
      } else if (seq.tokenIds.length + 1 < seq.sampling.maxNewTokens && seq.kvLength + 2 < slotTokens) {
        items.push({ seqId: seq.seqId, index: seq.kvLength + 1 });
      } else {
        continue;
      }
      members.push(seq);
    }
    let launched: PendingDecode | undefined;
    let launchError: unknown;
    if (items.length > 0) {
      try {
        launched = this.runner.launchDecode!(items);
        this.counters.decodeSteps++;
      } catch (e) {
        launchError = e;
      }
    }
    if (previous) this.collect(previous);
    if (launchError !== undefined) {
      for (const seq of members) if (!seq.finished) this.fail(seq, launchError);
      return;
    }
    if (!launched) return;
    const live = members.filter((seq) => !seq.finished);
    for (const seq of live) seq.pendingToken = true;
    if (live.length > 0) this.inflight = { members, pending: launched };
    else this.collect({ members, pending: launched }); // nobody waits for it: release it now
  }

  /** Reads a launched step's tokens and accepts those of sequences still running. */
  private collect(step: { members: Sequence[]; pending: PendingDecode }): void {
    let sampled: SampledToken[];
    try {
      sampled = step.pending.collect();
    } catch (e) {
      for (const seq of step.members) if (!seq.finished) this.fail(seq, e);
      return;
    }
    const live = step.members.filter((seq) => !seq.finished);
    for (const seq of live) seq.pendingToken = false;
    this.acceptStep(live, sampled);
  }

  /** Each member's KV grew by the fed token; accept the token sampled after it. */
  private acceptStep(members: Sequence[], sampled: SampledToken[]): void {
    this.counters.decodeTokens += members.length;
    const bySeq = new Map(sampled.map((t) => [t.seqId, t]));
    for (const seq of members) {
      seq.kvLength++;
      const token = bySeq.get(seq.seqId);
      if (!token) this.fail(seq, new Error(`the runner returned no token for sequence ${seq.seqId}`));
      else this.accept(seq, token);
    }
  }

  /** Record a sampled token, stream it, and finish the sequence if a stop rule fires. */
  private accept(seq: Sequence, token: SampledToken): void {
    try {
      this.acceptToken(seq, token);
    } catch (e) {
      // A detokenizer or callback failure ends this sequence, never the loop.
      if (this.prefilling.includes(seq) || this.decoding.includes(seq)) this.fail(seq, e);
    }
  }

  private acceptToken(seq: Sequence, token: SampledToken): void {
    seq.tokenIds.push(token.tokenId);
    seq.logprobs.push(token.logprob);
    if (seq.logits && token.logits) seq.logits.push(token.logits);
    if (!seq.incrementalText) {
      // Nobody watches the text as it grows: decode it once at the end.
      const stopId = seq.stopIds.has(token.tokenId);
      const full = seq.kvLength + 1 >= this.runner.capacity.slotTokens;
      if (stopId) this.complete(seq, "stop", token.tokenId);
      else if (seq.tokenIds.length >= seq.sampling.maxNewTokens || full) this.complete(seq, "length");
      return;
    }
    let finish: FinishReason | undefined;
    let stoppedBy: string | number | undefined;
    let delta = "";
    if (seq.stopIds.has(token.tokenId)) {
      finish = "stop";
      stoppedBy = token.tokenId;
      delta = seq.stops.append(seq.detokenizer.flush()).released + seq.stops.finish();
    } else {
      const check = seq.stops.append(seq.detokenizer.push(token.tokenId));
      delta = check.released;
      if (check.matched !== undefined) {
        finish = "stop";
        stoppedBy = check.matched;
      }
    }
    // The next decode step would write KV at index kvLength; the slot must have room.
    const full = seq.kvLength + 1 >= this.runner.capacity.slotTokens;
    if (!finish && (seq.tokenIds.length >= seq.sampling.maxNewTokens || full)) {
      finish = "length";
      const tail = seq.stops.append(seq.detokenizer.flush());
      delta += tail.released;
      if (tail.matched !== undefined) {
        finish = "stop";
        stoppedBy = tail.matched;
      } else delta += seq.stops.finish();
    }
    seq.request.onToken?.({ tokenId: token.tokenId, logprob: token.logprob, textDelta: delta });
    if (finish) this.complete(seq, finish, stoppedBy);
  }

  private complete(seq: Sequence, reason: FinishReason, stoppedBy?: string | number): void {
    this.detach(seq);
    const prompt = seq.request.prompt;
    const generatedInCache = seq.kvLength - seq.promptLength;
    this.pool.finish(seq.lease, {
      tokens: [...prompt.tokenIds, ...seq.tokenIds.slice(0, Math.max(0, generatedInCache))],
      images: prompt.images.map((i) => ({ offset: i.offset, length: i.length, key: i.key })),
    });
    seq.resolve({
      tokenIds: seq.tokenIds,
      logprobs: seq.logprobs,
      text: seq.incrementalText ? seq.stops.fullText : this.finalText(seq, reason),
      finishReason: reason,
      stoppedBy,
      promptTokens: seq.promptLength,
      cachedPromptTokens: seq.cached,
      logits: seq.logits,
    });
    this.emitFinished(seq, reason);
  }

  private emitFinished(seq: Sequence, reason: FinishReason | "error"): void {
    if (!this.events.active) return;
    const { seqId, promptLength: promptTokens, cached: cachedPromptTokens } = seq;
    this.events.emit({ type: "request_finished", seqId, promptTokens, cachedPromptTokens, generatedTokens: seq.tokenIds.length, finishReason: reason });
  }

  /** The whole generation decoded at once, without a stop token id that ended it. */
  private finalText(seq: Sequence, reason: FinishReason): string {
    const last = seq.tokenIds[seq.tokenIds.length - 1];
    const ids = reason === "stop" && last !== undefined && seq.stopIds.has(last) ? seq.tokenIds.slice(0, -1) : seq.tokenIds;
    return ids.length === 0 ? "" : this.options.decode(ids);
  }

  /** A failed sequence's KV is suspect: its session is dropped, the slot freed. */
  private fail(seq: Sequence, error: unknown): void {
    this.detach(seq);
    this.pool.finish(seq.lease, { tokens: [], images: [] });
    if (seq.lease.sessionId !== undefined) this.pool.release(seq.lease.sessionId);
    seq.reject(error);
    this.emitFinished(seq, "error");
  }

  private detach(seq: Sequence): void {
    seq.finished = true;
    const list = seq.decoding ? this.decoding : this.prefilling;
    const i = list.indexOf(seq);
    if (i >= 0) list.splice(i, 1);
    if (seq.onAbort) seq.request.signal?.removeEventListener("abort", seq.onAbort);
    this.runner.end(seq.seqId);
    this.ensureLoop(); // the freed slot may admit a waiting request
  }

  private abortRunning(seq: Sequence): void {
    // Called from an event handler, never during a step, so lists are consistent.
    if (!this.prefilling.includes(seq) && !this.decoding.includes(seq)) return;
    this.fail(seq, abortError());
  }

  private abortWaiting(entry: Waiting): void {
    const i = this.waiting.indexOf(entry);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    entry.reject(abortError());
  }

  private settleWaiting(w: Waiting, err: unknown): void {
    if (w.onAbort) w.request.signal?.removeEventListener("abort", w.onAbort);
    w.reject(err);
  }
}

function abortError(): Error {
  return new DOMException("the generation request was aborted", "AbortError");
}
