/**
 * The tensor side of the engine: runs prefill and decode steps of a FamilyDecoder (src/models/family.ts) over the
 * slot KV cache and samples on the device. One instance per model replica (one device).
 *
 * Per sequence it keeps the embeddings of the prompt tokens still to prefill (computed
 * once in `begin`, so every image goes through the vision tower exactly once even when
 * the prompt is prefilled in chunks), with the per-layer residuals of families that have
 * them (`promptInputs`: Qwen3-VL's deepstack features), the prompt's rotary positions,
 * and, for seeded requests, how many tokens it has drawn from its stream (row-streams.ts).
 *
 * Decode steps can be launched without waiting (`launchDecode`): sampling stays on the
 * device, the ids and log-probs start their copy to pinned host memory, and an event
 * marks when they have arrived. The next step may feed those ids straight from the
 * device, so the scheduler queues it before reading this one.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { FamilyDecoder } from "../models/family.ts";
import type { Prompt } from "./types.ts";
import { checkRgbImage } from "../core/image.ts";
import { DecodeGraphs, feedTokens, type FedTokens } from "./decode-graphs.ts";
import { SlotKvCache } from "./kv-cache.ts";
import { RowStreams, rowStreamKey } from "./row-streams.ts";
import { neverSampledIndex } from "../torch/logit-mask.ts";
import { packSamples, sampleRows, sampleRowsOnDevice, unpackSamples, type RowSampling } from "./sampler.ts";
import type {
  DecodeItem,
  LaunchItem,
  PendingDecode,
  PrefillChunk,
  RunnerCapacity,
  SampledToken,
  SequenceStart,
  StepRunner,
  TokenSampling,
} from "./step-runner.ts";

interface SequenceState {
  slot: number;
  cached: number;
  /** Embeddings of prompt tokens [cached, promptLength), kept until prefilled. */
  embeds: Tensor | undefined;
  /** The prompt whose embeddings are still to be made (the family embeds prompts in batches): at the first prefill that holds it. */
  toEmbed: Prompt | undefined;
  /** Per-layer residuals of the same tokens (family.ts `PromptInputs`), kept with them. */
  layerResiduals: Tensor[] | undefined;
  /** [axis][token] rotary positions of the prompt. */
  positions: number[][];
  /** Position of generated token i (0-based, i-th after the prompt) is promptLength + i + ropeShift. */
  ropeShift: number;
  sampling: TokenSampling;
  /** Tokens sampled so far: a seeded sequence's next draw in its stream (row-streams.ts). */
  draws: number;
}

export interface ModelRunnerOptions {
  slots: number;
  slotTokens: number;
  /** Seed of the generator unseeded requests share. */
  seed?: number;
  /** Replay decode steps as CUDA graphs (CUDA devices only; default on there). */
  cudaGraphs?: boolean;
  /** Math attention instead of libtorch's fused SDPA kernels. */
  mathAttention?: boolean;
  /** Ids never sampled (the family's vision ids): out of every row's distribution (sampler.ts). */
  neverSample?: readonly number[];
}

export class ModelRunner implements StepRunner {
  readonly capacity: RunnerCapacity;
  readonly cache: SlotKvCache;
  private readonly seqs = new Map<number, SequenceState>();
  private readonly shared: torch.Generator;
  /** What seeded rows' streams share between decode steps. */
  private readonly streams = new RowStreams();
  graphs: DecodeGraphs | undefined;
  /** Why CUDA graphs were turned off after a failed capture or replay (decode then runs eagerly). */
  graphsDisabled: string | undefined;
  /** Token ids the last launched decode step sampled (on the device), and each sequence's row. */
  private lastLaunched: { tokens: Tensor; rowOf: Map<number, number> } | undefined;
  private readonly onCuda: boolean;
  /** The ids no row samples (sampler.ts), or undefined. */
  private readonly never: Tensor | undefined;

  constructor(
    readonly model: FamilyDecoder,
    options: ModelRunnerOptions,
  ) {
    const spec = model.spec;
    this.cache = new SlotKvCache(spec, options.slots, options.slotTokens, options.mathAttention ?? false);
    this.capacity = { slots: options.slots, slotTokens: options.slotTokens, vocabSize: spec.vocabSize };
    this.shared = new torch.Generator({ seed: options.seed ?? 0, device: spec.device });
    this.onCuda = String(spec.device).startsWith("cuda");
    this.graphs = this.onCuda && (options.cudaGraphs ?? true) ? new DecodeGraphs(model, this.cache, options.slots) : undefined;
    const never = neverSampledIndex(options.neverSample ?? [], spec.vocabSize, spec.device);
    this.never = never && torch.keep(never);
  }

  begin(start: SequenceStart): void {
    torch.noGrad(() => this.beginSequence(start));
  }

  prefill(chunks: PrefillChunk[]): SampledToken[] {
    return torch.noGrad(() => this.prefillChunks(chunks));
  }

  decode(items: DecodeItem[]): SampledToken[] {
    return this.launchDecode(items).collect();
  }

  launchDecode(items: LaunchItem[]): PendingDecode {
    return torch.noGrad(() => {
      // In slot order: rows in slots 0..n-1 then read the cache in place.
      const ordered = [...items].sort((a, b) => this.state(a.seqId).slot - this.state(b.seqId).slot);
      const seqIds = ordered.map((i) => i.seqId);
      const wantLogits = seqIds.map((id) => this.state(id).sampling.returnLogits);
      const step = torch.tidy(() => {
        const logits = this.decodeLogits(ordered, this.fedTokens(ordered));
        const { tokens, logprobs } = sampleRowsOnDevice(logits, this.rowSampling(seqIds), this.shared, this.streams, this.never);
        const packed = packSamples(tokens, logprobs);
        return {
          tokens: torch.keep(tokens),
          // Non-blocking into pinned memory on CUDA: the copy overlaps whatever is queued next.
          host: torch.keep(this.onCuda ? packed.to({ device: "cpu", nonBlocking: true }) : packed),
          // A graph's logits are overwritten by the next replay: copy the rows asked for now.
          logits: wantLogits.some(Boolean) ? torch.keep(logits.clone().float()) : undefined,
        };
      });
      const arrived = this.onCuda ? new torch.cuda.Event() : undefined;
      arrived?.record();
      this.lastLaunched?.tokens.dispose();
      this.lastLaunched = { tokens: step.tokens, rowOf: new Map(seqIds.map((id, row) => [id, row])) };
      let collected = false;
      return {
        collect: (): SampledToken[] => {
          if (collected) throw new Error("a launched decode step was collected twice");
          collected = true;
          try {
            arrived?.synchronize();
            const { tokenIds, logprobs } = unpackSamples(step.host.toFloat32Array());
            const hostLogits = step.logits?.toFloat32Array();
            const V = this.capacity.vocabSize;
            return seqIds.map((seqId, i) => ({
              seqId,
              tokenId: tokenIds[i]!,
              logprob: logprobs[i]!,
              logits: wantLogits[i] ? hostLogits!.slice(i * V, (i + 1) * V) : undefined,
            }));
          } finally {
            arrived?.dispose();
            step.host.dispose();
            step.logits?.dispose();
          }
        },
      };
    });
  }

  /** Where items without a token id find theirs: the last launched step's sampled ids. */
  private fedTokens(ordered: LaunchItem[]): FedTokens | undefined {
    const from: number[] = [];
    const to: number[] = [];
    ordered.forEach((item, row) => {
      if (item.tokenId !== undefined) return;
      const source = this.lastLaunched?.rowOf.get(item.seqId);
      if (source === undefined) throw new Error(`sequence ${item.seqId} has no token from the last launched decode step`);
      from.push(source);
      to.push(row);
    });
    return to.length > 0 ? { source: this.lastLaunched!.tokens, from, to } : undefined;
  }

  /** (rows, vocab) logits of one decode step: a CUDA graph replay where one applies. */
  private decodeLogits(ordered: LaunchItem[], fed: FedTokens | undefined): Tensor {
    if (this.graphs?.bucketFor(ordered.length)) {
      try {
        const rows = ordered.map((item) => {
          const s = this.state(item.seqId);
          return { tokenId: item.tokenId ?? 0, position: item.index + s.ropeShift, slot: s.slot, index: item.index };
        });
        return this.graphs.run(rows, fed);
      } catch (e) {
        // Graphs are an optimisation: keep serving eagerly, and say why.
        this.graphsDisabled = (e as Error).message;
        this.graphs.dispose();
        this.graphs = undefined;
        process.stderr.write(`vagen engine: CUDA graphs disabled, decoding eagerly (${this.graphsDisabled})\n`);
      }
    }
    const spec = this.model.spec;
    const device = spec.device;
    const B = ordered.length;
    const states = ordered.map((i) => this.state(i.seqId));
    const ids = torch.tensor(Float64Array.from(ordered, (i) => i.tokenId ?? 0), [B], { dtype: "i64", device });
    if (fed) feedTokens(ids, fed);
    const inputs = this.model.embedTokens(ids).view(B, 1, spec.hiddenSize);
    const pos = new Float64Array(spec.positionAxes * B);
    for (let a = 0; a < spec.positionAxes; a++) {
      ordered.forEach((item, b) => (pos[a * B + b] = item.index + states[b]!.ropeShift));
    }
    const positions = torch.tensor(pos, [spec.positionAxes, B, 1], { dtype: "i64", device });
    const attention = this.cache.step({ slots: states.map((s) => s.slot), starts: ordered.map((i) => i.index), lengths: ordered.map(() => 1) });
    const hidden = this.model.forward(inputs, positions, attention);
    return this.model.logits(hidden.view(B, spec.hiddenSize));
  }

  private beginSequence(start: SequenceStart): void {
    const positions = this.model.promptPositions(start.prompt);
    const n = start.prompt.tokenIds.length;
    let maxPos = -1;
    for (const axis of positions) for (let i = 0; i < n; i++) maxPos = Math.max(maxPos, axis[i]!);
    // Families that embed prompts in batches wait for the prefill, which embeds all of its
    // new sequences (and their images) at once.
    const batched = this.model.embedPrompts !== undefined && this.model.promptInputs === undefined;
    // A malformed image fails its own request here, not every sequence of the prefill that
    // would have embedded it (the prompt's builder has already sized each image).
    if (batched) for (const image of start.prompt.images) checkRgbImage(image.image);
    const inputs = batched
      ? { embeds: undefined, layerResiduals: undefined }
      : torch.tidy(() => {
          const got = this.model.promptInputs?.(start.prompt, start.cached) ?? { embeds: this.model.embedPrompt(start.prompt, start.cached) };
          return { embeds: torch.keep(got.embeds), layerResiduals: got.layerResiduals?.map((t) => torch.keep(t)) };
        });
    this.seqs.set(start.seqId, {
      slot: start.slot,
      cached: start.cached,
      embeds: inputs.embeds,
      toEmbed: batched ? start.prompt : undefined,
      layerResiduals: inputs.layerResiduals,
      positions,
      ropeShift: maxPos + 1 - n,
      sampling: start.sampling,
      draws: 0,
    });
  }

  /** The embeddings of every sequence here still waiting for them, in one family call. */
  private embedWaiting(states: SequenceState[]): void {
    const waiting = states.filter((s) => s.toEmbed !== undefined);
    if (waiting.length === 0) return;
    const embeds = torch.tidy(() => this.model.embedPrompts!(waiting.map((s) => ({ prompt: s.toEmbed!, from: s.cached }))).map((t) => torch.keep(t)));
    waiting.forEach((s, i) => {
      s.embeds = embeds[i];
      s.toEmbed = undefined;
    });
  }

  private prefillChunks(chunks: PrefillChunk[]): SampledToken[] {
    const spec = this.model.spec;
    const device = spec.device;
    const states = chunks.map((c) => this.state(c.seqId));
    const lengths = chunks.map((c) => c.end - c.start);
    const T = Math.max(...lengths);
    const B = chunks.length;
    this.embedWaiting(states);
    const sampled = torch.tidy(() => {
      // Each row's slice of a per-token tensor, zero-padded to T (zeros where it has none).
      const padded = (b: number, source: Tensor | undefined) => {
        const c = chunks[b]!;
        const s = states[b]!;
        const zeros = (n: number) => torch.zeros([n, spec.hiddenSize], { dtype: spec.dtype, device });
        if (!source) return zeros(T);
        const part = source.narrow(0, c.start - s.cached, lengths[b]!);
        return lengths[b]! < T ? torch.cat([part, zeros(T - lengths[b]!)]) : part;
      };
      const inputs = torch.stack(chunks.map((_, b) => padded(b, states[b]!.embeds!)));
      const residualLayers = Math.max(0, ...states.map((s) => s.layerResiduals?.length ?? 0));
      const layerResiduals = Array.from({ length: residualLayers }, (_, l) =>
        torch.stack(chunks.map((_, b) => padded(b, states[b]!.layerResiduals?.[l]))),
      );
      const pos = new Float64Array(spec.positionAxes * B * T);
      chunks.forEach((c, b) => {
        const axes = states[b]!.positions;
        for (let a = 0; a < spec.positionAxes; a++) {
          for (let t = 0; t < lengths[b]!; t++) pos[(a * B + b) * T + t] = axes[a]![c.start + t]!;
        }
      });
      const positions = torch.tensor(pos, [spec.positionAxes, B, T], { dtype: "i64", device });
      const attention = this.cache.step({ slots: states.map((s) => s.slot), starts: chunks.map((c) => c.start), lengths });
      const hidden = residualLayers > 0 ? this.model.forward(inputs, positions, attention, layerResiduals) : this.model.forward(inputs, positions, attention);
      const want = chunks.map((c, b) => (c.sample ? b : -1)).filter((b) => b >= 0);
      if (want.length === 0) return undefined;
      const lastRows = torch.tensor(Float64Array.from(want, (b) => b * T + lengths[b]! - 1), [want.length], { dtype: "i64", device });
      const last = hidden.reshape(B * T, spec.hiddenSize).indexSelect(0, lastRows);
      return this.sample(last, want.map((b) => chunks[b]!.seqId));
    });
    chunks.forEach((c, b) => {
      const s = states[b]!;
      if (c.sample) {
        s.embeds?.dispose();
        s.embeds = undefined;
        for (const t of s.layerResiduals ?? []) t.dispose();
        s.layerResiduals = undefined;
      }
    });
    return sampled ?? [];
  }

  end(seqId: number): void {
    const s = this.seqs.get(seqId);
    if (!s) return;
    s.embeds?.dispose();
    for (const t of s.layerResiduals ?? []) t.dispose();
    this.seqs.delete(seqId);
  }

  dispose(): void {
    for (const id of [...this.seqs.keys()]) this.end(id);
    this.lastLaunched?.tokens.dispose();
    this.lastLaunched = undefined;
    this.graphs?.dispose();
    this.cache.dispose();
    this.shared.dispose();
    this.streams.dispose();
    this.never?.dispose();
  }

  private sample(hidden: Tensor, seqIds: number[]): SampledToken[] {
    return this.sampleLogits(this.model.logits(hidden), seqIds);
  }

  private rowSampling(seqIds: number[]): RowSampling[] {
    return seqIds.map((id) => {
      const s = this.state(id);
      const draw = s.draws++;
      const { temperature, topP, topK, seed } = s.sampling;
      return { temperature, topP, topK, streamKey: seed === undefined ? undefined : rowStreamKey(seed, draw) };
    });
  }

  private sampleLogits(logits: Tensor, seqIds: number[]): SampledToken[] {
    const { tokenIds, logprobs } = sampleRows(logits, this.rowSampling(seqIds), this.shared, this.streams, this.never);
    const wantLogits = seqIds.map((id) => this.state(id).sampling.returnLogits);
    const hostLogits = wantLogits.some(Boolean) ? logits.float().toFloat32Array() : undefined;
    const [, V] = torch.dims2(logits, "logits");
    return seqIds.map((seqId, i) => ({
      seqId,
      tokenId: tokenIds[i]!,
      logprob: logprobs[i]!,
      logits: wantLogits[i] ? hostLogits!.slice(i * V, (i + 1) * V) : undefined,
    }));
  }

  private state(seqId: number): SequenceState {
    const s = this.seqs.get(seqId);
    if (!s) throw new Error(`the model runner has no sequence ${seqId}`);
    return s;
  }
}
