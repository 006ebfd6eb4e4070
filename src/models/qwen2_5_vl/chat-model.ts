/**
 * Qwen2.5-VL behind the family-independent `ChatModel` seam: tokenizer, chat template and
 * image processor from the model directory, and batched KV-cached decoding on top of
 * `Qwen25VLModel` (left-padded prefill, one token per row per step).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { RGBImage } from "../../core/image.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import { validate } from "../../config/index.ts";
import { ChatTemplate, type TemplateMessage } from "../chat-template.ts";
import type { ChatModel, DecodeSession, LoadModelOptions, PromptInput } from "../family.ts";
import { DEFAULT_IMAGE_PROCESSOR, imageProcessorOptions, PreprocessorConfigSchema, processImages, type ImageProcessorOptions, type ProcessedImages } from "../image-processor.ts";
import { ConcatKVCache } from "../kv-cache.ts";
import { readJson, TextTokenizer } from "../tokenizer.ts";
import { idsTensor, Qwen25VLModel } from "./model.ts";
import { Qwen25VLProcessor } from "./processor.ts";

/** A prompt plus its processed images (so decoding does not process them twice). */
export interface Qwen25VLPrompt extends PromptInput {
  processed?: ProcessedImages;
}

export class Qwen25VLChatModel implements ChatModel {
  readonly family = "qwen2_5_vl";
  readonly processor: Qwen25VLProcessor;
  readonly eosTokenIds: readonly number[];
  readonly padTokenId: number;

  constructor(
    readonly model: Qwen25VLModel,
    readonly tokenizer: TextTokenizer,
    template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    generationEos: readonly number[] = [],
  ) {
    this.processor = new Qwen25VLProcessor(tokenizer, template, imageOptions, model.config.imageTokenId);
    const eos = new Set<number>([...model.config.eosTokenIds, ...generationEos]);
    const imEnd = tokenizer.maybeTokenId("<|im_end|>");
    if (imEnd !== undefined) eos.add(imEnd);
    const cfgEos = tokenizer.configToken("eos_token");
    if (cfgEos) eos.add(tokenizer.tokenId(cfgEos));
    this.eosTokenIds = [...eos];
    const pad = tokenizer.configToken("pad_token");
    this.padTokenId = pad ? tokenizer.tokenId(pad) : (this.eosTokenIds[0] ?? 0);
  }

  static load(dir: string, opts: LoadModelOptions): Qwen25VLChatModel {
    const model = Qwen25VLModel.load(dir, opts);
    const tokenizer = TextTokenizer.fromDir(dir);
    const template = ChatTemplate.fromDir(dir);
    const ppPath = join(dir, "preprocessor_config.json");
    const imageOptions = existsSync(ppPath)
      ? imageProcessorOptions(validate(PreprocessorConfigSchema, readJson(ppPath), { file: ppPath }))
      : DEFAULT_IMAGE_PROCESSOR;
    const genPath = join(dir, "generation_config.json");
    const genEos = existsSync(genPath) ? readJson(genPath).eos_token_id : undefined;
    const eosList = typeof genEos === "number" ? [genEos] : Array.isArray(genEos) ? (genEos as number[]) : [];
    return new Qwen25VLChatModel(model, tokenizer, template, imageOptions, eosList);
  }

  get device(): Device {
    return this.model.device;
  }

  get dtype(): DType {
    return this.model.dtype;
  }

  encodeChat(messages: readonly TemplateMessage[], images: readonly RGBImage[]): Qwen25VLPrompt {
    const encoded = this.processor.encodeChat(messages, images, { addGenerationPrompt: true });
    return { inputIds: encoded.inputIds, images, processed: encoded.images };
  }

  startDecoding(prompts: readonly PromptInput[]): DecodeSession {
    return new Qwen25VLDecodeSession(this, prompts as readonly Qwen25VLPrompt[]);
  }

  dispose(): void {
    this.model.dispose();
  }
}

class Qwen25VLDecodeSession implements DecodeSession {
  readonly padTokenId: number;
  private readonly cache: ConcatKVCache;
  private readonly mask: number[][];
  private readonly nextPositions: number[];
  private pending: Tensor | undefined;

  constructor(
    private readonly chat: Qwen25VLChatModel,
    prompts: readonly Qwen25VLPrompt[],
  ) {
    const model = chat.model;
    this.padTokenId = chat.padTokenId;
    this.cache = new ConcatKVCache(model.config.text.numLayers);
    // Left padding: every row's last prompt token sits in the last column.
    const width = Math.max(...prompts.map((p) => p.inputIds.length));
    const ids = prompts.map((p) => [...new Array<number>(width - p.inputIds.length).fill(this.padTokenId), ...p.inputIds]);
    this.mask = prompts.map((p) => [...new Array<number>(width - p.inputIds.length).fill(0), ...new Array<number>(p.inputIds.length).fill(1)]);
    const processed = prompts.map((p) => p.processed ?? (p.images.length ? processImages(p.images, chat.imageOptions) : undefined));
    const grids = processed.flatMap((p) => p?.gridThw ?? []);
    const { result, nextPositions } = torch.noGrad(() =>
      torch.tidy(() => {
        const pixels = joinPixels(processed, model.device);
        const out = model.forwardBatch(
          { inputIds: ids, attentionMask: this.mask.some((r) => r.includes(0)) ? this.mask : undefined, pixelValues: pixels, imageGridThw: grids },
          { kvCache: this.cache },
        );
        const last = out.hidden.narrow(1, width - 1, 1);
        return { result: model.logits(last).squeeze(1).to("f32"), nextPositions: out.nextPositions };
      }),
    );
    this.nextPositions = nextPositions;
    this.pending = result;
  }

  nextLogits(): Float32Array[] {
    const t = this.pending;
    if (!t) throw new Error("nextLogits() called twice without append()");
    const [B, V] = t.shape as [number, number];
    const flat = t.toArray() as Float32Array;
    t.dispose();
    this.pending = undefined;
    return Array.from({ length: B }, (_, b) => flat.subarray(b * V, (b + 1) * V));
  }

  append(tokens: readonly number[], active: readonly boolean[]): void {
    const model = this.chat.model;
    tokens.forEach((_, b) => this.mask[b]!.push(active[b] ? 1 : 0));
    const positions = this.nextPositions.slice();
    this.nextPositions.forEach((_, b) => this.nextPositions[b]!++);
    this.pending = torch.noGrad(() =>
      torch.tidy(() => {
        const device = model.device;
        const embeds = model.embed(tokens.map((t) => [t]));
        const pos = torch.tensor(Float64Array.from([...positions, ...positions, ...positions]), [3, tokens.length, 1], { dtype: "i64", device });
        const needMask = this.mask.some((r) => r.includes(0));
        const hidden = model.forward({
          inputsEmbeds: embeds,
          positionIds: pos,
          attentionMask: needMask ? idsTensor(this.mask, device) : undefined,
          kvCache: this.cache,
        });
        return model.logits(hidden).squeeze(1).to("f32");
      }),
    );
  }

  dispose(): void {
    this.pending?.dispose();
    this.pending = undefined;
    this.cache.dispose();
  }
}

function joinPixels(processed: readonly (ProcessedImages | undefined)[], device: Device): Tensor | undefined {
  const present = processed.filter((p): p is ProcessedImages => !!p && p.numPatches > 0);
  if (present.length === 0) return undefined;
  const rows = present.reduce((s, p) => s + p.numPatches, 0);
  const dim = present[0]!.patchDim;
  const all = new Float32Array(rows * dim);
  let o = 0;
  for (const p of present) {
    all.set(p.pixelValues, o);
    o += p.pixelValues.length;
  }
  return torch.tensor(all, [rows, dim], { dtype: "f32", device });
}
