/**
 * A StepRunner without tensors, for testing the scheduler on its own. Each slot keeps the
 * token ids "in its KV cache"; the next token is a hash of the slot's whole content, so a
 * scheduler that reuses a stale or wrong prefix produces different tokens than a fresh
 * run (and `begin` rejects a claimed cache hit that does not match the slot).
 */
import type { DecodeItem, PrefillChunk, SampledToken, SequenceStart, StepRunner } from "../../src/engine/step-runner.ts";

export class FakeRunner implements StepRunner {
  readonly slotContent: number[][];
  private readonly seqs = new Map<number, SequenceStart>();
  prefillCalls: PrefillChunk[][] = [];
  decodeBatchSizes: number[] = [];
  ended: number[] = [];

  constructor(
    slots: number,
    slotTokens: number,
    readonly vocabSize = 50,
  ) {
    this.capacity = { slots, slotTokens, vocabSize };
    this.slotContent = Array.from({ length: slots }, () => []);
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
      const content = this.slotContent[this.seqs.get(item.seqId)!.slot]!;
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
