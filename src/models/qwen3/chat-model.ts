/**
 * Qwen3 (text) as a `ModelFamily` (family.ts): the tokenizer and chat template of a model
 * directory and the shared decoder behind the seam the engine, the trainer and the CLI use.
 *
 *   prompts     buildPrompt (chat messages -> ids; text only), conversationCodec
 *   engine      promptPositions (0..n-1, one axis), embedPrompt, embedTokens, forward
 *               over an AttentionBackend, logits
 *   training    forwardForTraining (a padded batch, causal attention, differentiable)
 *
 * The template renders with the variables the loader was given (`chatTemplateVariables`:
 * Qwen3's `enable_thinking`); without them it renders as transformers' apply_chat_template
 * does by default, in thinking mode. An image anywhere is a VagenError naming the message.
 */
import { basename, resolve } from "node:path";
import type { ChatMessage } from "../../core/chat.ts";
import { VagenError } from "../../core/errors.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import type { AttentionBackend } from "../attention.ts";
import { toTemplateMessages } from "../chat-template.ts";
import type { ConversationCodec } from "../conversation.ts";
import { chatEosTokenIds, generationEosTokenIds } from "../eos.ts";
import type { LoadModelOptions, ModelFamily, ModelSpec, TrainingBatch, TrainingForwardOptions } from "../family.ts";
import type { Prompt } from "../prompt.ts";
import { TextChatTemplate } from "../text-chat-template.ts";
import { TextTokenizer } from "../tokenizer.ts";
import { Qwen3ConversationCodec } from "./conversation-codec.ts";
import { Qwen3Model } from "./model.ts";

export const QWEN3_FAMILY = "qwen3";

export interface Qwen3ChatModelOptions {
  /** generation_config.json's end-of-sequence ids, added to the model's own. */
  generationEosTokenIds?: readonly number[];
  /** The name clients use for the model; default "qwen3". */
  modelName?: string;
  /** Extra chat template variables (`enable_thinking: false` for non-thinking prompts). */
  templateVariables?: Readonly<Record<string, unknown>>;
}

export class Qwen3ChatModel implements ModelFamily {
  readonly family = QWEN3_FAMILY;
  readonly modelName: string;
  readonly eosTokenIds: readonly number[];
  readonly spec: ModelSpec;
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  /** A text model has no image placeholders or vision markers. */
  readonly visionTokenIds: readonly number[] = [];
  private readonly templateVariables: Readonly<Record<string, unknown>> | undefined;

  constructor(
    readonly model: Qwen3Model,
    readonly tokenizer: TextTokenizer,
    readonly template: TextChatTemplate,
    opts: Qwen3ChatModelOptions = {},
  ) {
    this.modelName = opts.modelName ?? this.family;
    this.eosTokenIds = chatEosTokenIds(tokenizer, model.config.eosTokenIds, opts.generationEosTokenIds ?? []);
    this.tokenBytes = tokenizer.tokenBytes();
    this.templateVariables = opts.templateVariables;
    this.spec = specOf(model);
  }

  static load(dir: string, opts: LoadModelOptions): Qwen3ChatModel {
    const model = Qwen3Model.load(dir, opts);
    try {
      return new Qwen3ChatModel(model, TextTokenizer.fromDir(dir), TextChatTemplate.fromDirForText(dir, QWEN3_FAMILY), {
        generationEosTokenIds: generationEosTokenIds(dir),
        modelName: basename(resolve(dir)),
        templateVariables: opts.chatTemplateVariables,
      });
    } catch (err) {
      model.dispose();
      throw err;
    }
  }

  get device(): Device {
    return this.model.device;
  }

  get dtype(): DType {
    return this.model.dtype;
  }

  get weights(): Map<string, Tensor> {
    return this.model.weights;
  }

  // ---- prompts ---------------------------------------------------------------------------

  buildPrompt(messages: readonly ChatMessage[]): Prompt {
    const { messages: converted } = toTemplateMessages(messages);
    // The template refuses image parts (text-chat-template.ts), naming the message.
    const text = this.template.render(converted, { addGenerationPrompt: true, variables: this.variables() });
    return { tokenIds: this.tokenizer.encode(text), images: [] };
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids, { skipSpecialTokens: true });
  }

  conversationCodec(): ConversationCodec {
    return new Qwen3ConversationCodec(this.tokenizer, this.template, this.templateVariables);
  }

  private variables(): Record<string, unknown> | undefined {
    return this.templateVariables && { ...this.templateVariables };
  }

  // ---- what the engine runs --------------------------------------------------------------

  promptPositions(prompt: Prompt): number[][] {
    refuseImages(prompt.images.length, "prompt");
    return [prompt.tokenIds.map((_, i) => i)];
  }

  embedPrompt(prompt: Prompt, from: number): Tensor {
    refuseImages(prompt.images.length, "prompt");
    const ids = prompt.tokenIds.slice(from);
    return this.model.embed(torch.tensor(Float64Array.from(ids), [ids.length], { dtype: "i64", device: this.device }));
  }

  embedTokens(ids: Tensor): Tensor {
    return this.model.embed(ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor {
    return this.model.forward({ inputsEmbeds, positionIds: positions, attention });
  }

  logits(hidden: Tensor): Tensor {
    return this.model.logits(hidden);
  }

  // ---- training --------------------------------------------------------------------------

  forwardForTraining(batch: TrainingBatch, opts: TrainingForwardOptions = {}): Tensor {
    if (batch.images.length !== batch.inputIds.length) {
      throw new VagenError(`training batch: ${batch.inputIds.length} rows of ids but ${batch.images.length} rows of images`);
    }
    batch.images.forEach((row, b) => refuseImages(row.length, `training batch row ${b}`));
    return this.model.forwardBatch({ inputIds: batch.inputIds, attentionMask: batch.attentionMask }, { mathAttention: opts.mathAttention });
  }

  isVisionWeight(_name: string): boolean {
    return false;
  }

  dispose(): void {
    this.model.dispose();
  }
}

function refuseImages(count: number, what: string): void {
  if (count > 0) {
    throw new VagenError(`${what}: ${count} image(s) given to qwen3, a text-only model family`, "send text only to this model, or use a vision-language model (qwen2_5_vl)");
  }
}

function specOf(model: Qwen3Model): ModelSpec {
  const c = model.config.decoder;
  let weightBytes = 0;
  // Tied embeddings are one tensor in the map, read twice (embedding and head) but counted once.
  for (const t of model.weights.values()) weightBytes += t.nbytes();
  return {
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    hiddenSize: c.hiddenSize,
    vocabSize: c.vocabSize,
    positionAxes: 1,
    dtype: model.dtype,
    device: model.device,
    maxPositions: model.config.maxPositions,
    weightBytes,
  };
}
