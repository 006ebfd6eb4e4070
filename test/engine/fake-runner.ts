/**
 * A StepRunner without tensors, for testing the scheduler on its own. Each slot keeps the
 * token ids "in its KV cache"; the next token is a hash of the slot's whole content, so a
 * scheduler that reuses a stale or wrong prefix produces different tokens than a fresh
 * run (and `begin` rejects a claimed cache hit that does not match the slot).
 */
import type {
  DecodeItem,
  LaunchItem,
  PendingDecode,
  PrefillChunk,
  SampledToken,
  SequenceStart,
  StepRunner,
} from "../../src/engine/step-runner.ts";

export class FakeRunner implements StepRunner {
  readonly slotContent: number[][];
  private readonly seqs = new Map<number, SequenceStart>();
  prefillCalls: PrefillChunk[][] = [];
  decodeBatchSizes: number[] = [];
  ended: number[] = [];

  /**
   * With `overlap`, the runner also offers launchDecode like a device runner: a step's
   * tokens stay "on the device" (readable only by the next launched step) until collected.
   */
  constructor(
    slots: number,
    slotTokens: number,
    readonly vocabSize = 50,
    overlap = false,
  ) {
    this.capacity = { slots, slotTokens, vocabSize };
    this.slotContent = Array.from({ length: slots }, () => []);
    if (!overlap) this.launchDecode = undefined;
  }

  /** Tokens of the last launched step, by sequence: what a device-fed item reads. */
  private lastLaunched = new Map<number, number>();
  /** Launched steps not collected yet, oldest first. */
  private readonly uncollected: PendingDecode[] = [];

  launchDecode?: (items: LaunchItem[]) => PendingDecode = (items) =>
    this.step(() => {
      const resolved = items.map((item) => {
        const tokenId = item.tokenId ?? this.lastLaunched.get(item.seqId);
        if (tokenId === undefined) throw new Error(`sequence ${item.seqId} has no token from the last launched step`);
        return { seqId: item.seqId, tokenId, index: item.index };
      });
      const tokens = this.decodeNow(resolved);
      this.lastLaunched = new Map(tokens.map((t) => [t.seqId, t.tokenId]));
      let collected = false;
      const pending: PendingDecode = {
        collect: () => {
          if (collected) throw new Error("a launched step was collected twice");
          if (this.uncollected[0] !== pending) throw new Error("launched steps must be collected in launch order");
          collected = true;
          this.uncollected.shift();
          return tokens;
        },
      };
      this.uncollected.push(pending);
      this.maxQueued = Math.max(this.maxQueued, this.uncollected.length);
      return pending;
    });

  /** Most launched steps uncollected at once: 2 when steps overlap. */
  maxQueued = 0;

  /** Steps launched and never collected (a scheduler leak). */
  get pendingSteps(): number {
    return this.uncollected.length;
  }
  readonly capacity: { slots: number; slotTokens: number; vocabSize: number };

  begin(start: SequenceStart): void {
    const content = this.slotContent[start.slot]!;
    for (let i = 0; i < start.cached; i++) {
      if (content[i] !== start.prompt.tokenIds[i]) throw new Error(`slot ${start.slot} does not hold the claimed prefix at ${i}`);
    }
    this.seqs.set(start.seqId, start);
  }

  /** Set while a step runs: a scheduler that re-enters the runner mid-step is a bug. */
  private inStep = false;

  private step<T>(fn: () => T): T {
    if (this.inStep) throw new Error("the runner was re-entered during a step");
    this.inStep = true;
    try {
      return fn();
    } finally {
      this.inStep = false;
    }
  }

  prefill(chunks: PrefillChunk[]): SampledToken[] {
    return this.step(() => this.prefillNow(chunks));
  }

  decode(items: DecodeItem[]): SampledToken[] {
    return this.step(() => this.decodeNow(items));
  }

  private prefillNow(chunks: PrefillChunk[]): SampledToken[] {
    this.prefillCalls.push(chunks);
    const out: SampledToken[] = [];
    for (const c of chunks) {
      const seq = this.seqs.get(c.seqId)!;
      const content = this.slotContent[seq.slot]!;
      for (let i = c.start; i < c.end; i++) content[i] = seq.prompt.tokenIds[i]!;
      if (c.sample) out.push(this.sample(c.seqId, content.slice(0, c.end)));
    }
    return out;
  }

  private decodeNow(items: DecodeItem[]): SampledToken[] {
    this.decodeBatchSizes.push(items.length);
    return items.map((item) => {
      const seq = this.seqs.get(item.seqId);
      if (!seq) throw new Error(`decode of sequence ${item.seqId}, which has ended`);
      const content = this.slotContent[seq.slot]!;
      content[item.index] = item.tokenId;
      return this.sample(item.seqId, content.slice(0, item.index + 1));
    });
  }

  end(seqId: number): void {
    this.ended.push(seqId);
    this.seqs.delete(seqId);
  }

  dispose(): void {}

  private sample(seqId: number, context: number[]): SampledToken {
    let h = 2166136261;
    for (const t of context) h = Math.imul(h ^ t, 16777619) >>> 0;
    const tokenId = h % this.vocabSize;
    return { seqId, tokenId, logprob: -((h >>> 8) % 1000) / 100 };
  }
}

/** Token id i decodes to the letter at i in this alphabet (ids >= 26 are digits). */
export function letters(ids: readonly number[]): string {
  return ids.map((i) => (i < 26 ? String.fromCharCode(97 + i) : String(i % 10))).join("");
}
