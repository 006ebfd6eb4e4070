/**
 * Model families and how to load a model directory: one registry keyed by config.json's
 * `model_type`. Everything above this module (engine, trainer, CLI) talks to the loaded
 * `ModelFamily` (family.ts) and nothing else of a family.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { VagenError } from "../core/errors.ts";
import type { FamilyLoader, LoadModelOptions, ModelFamily } from "./family.ts";
import { Qwen25VLChatModel } from "./qwen2_5_vl/chat-model.ts";
import { qwen25VLPeftModuleName } from "./qwen2_5_vl/weights.ts";
import { Qwen3ChatModel } from "./qwen3/chat-model.ts";
import { Qwen3VLChatModel } from "./qwen3_vl/chat-model.ts";
import { qwen3VLCheckpointName, qwen3VLPeftModuleName } from "./qwen3_vl/weights.ts";
import { InternVLChatModel } from "./internvl/chat-model.ts";
import { internVLCheckpointName, internVLPeftModuleName } from "./internvl/weights.ts";
import { readJson } from "./tokenizer.ts";
import { Glm4vChatModel } from "./glm4v/chat-model.ts";
import { glm4vCheckpointName, glm4vPeftModuleName } from "./glm4v/weights.ts";

export type {
  FamilyDecoder,
  FamilyLoader,
  LoadModelOptions,
  ModelFamily,
  ModelSpec,
  PromptBuilder,
  PromptInputs,
  TrainingBatch,
  TrainingForwardOptions,
} from "./family.ts";
export type { Prompt, PromptImage } from "./prompt.ts";
export { causalAttention, rotated, type AttentionBackend, type AttentionInput } from "./attention.ts";
export { TextTokenizer } from "./tokenizer.ts";
export { ChatTemplate, toTemplateMessages, type TemplateMessage, type TemplateContentPart } from "./chat-template.ts";
export { ValueHead } from "./value-head.ts";
export { LoraAdapter, LORA_MODULES, PEFT_PREFIX, adapterOf, attachAdapter, loraModulePath, loraTargets, loraWeightNames, type LoraModule, type LoraSettings } from "./lora.ts";
export { readPng } from "./image-io.ts";
export { Qwen25VLModel } from "./qwen2_5_vl/model.ts";
export { Qwen25VLChatModel } from "./qwen2_5_vl/chat-model.ts";
export { Qwen3Model } from "./qwen3/model.ts";
export { Qwen3ChatModel } from "./qwen3/chat-model.ts";
export { Qwen3VLModel } from "./qwen3_vl/model.ts";
export { Qwen3VLChatModel } from "./qwen3_vl/chat-model.ts";

/** model_type -> loader. */
const FAMILIES = new Map<string, FamilyLoader>([
  ["qwen2_5_vl", (dir, opts) => Qwen25VLChatModel.load(dir, opts)],
  ["qwen3", (dir, opts) => Qwen3ChatModel.load(dir, opts)],
  ["qwen3_vl", (dir, opts) => Qwen3VLChatModel.load(dir, opts)],
  ["glm4v", (dir, opts) => Glm4vChatModel.load(dir, opts)],
  ["internvl", (dir, opts) => InternVLChatModel.load(dir, opts)],
]);

/**
 * model_type -> how PEFT names a decoder module (`model.layers.0.self_attn.q_proj` in
 * vagen's checkpoint names) over transformers' model class, where the two differ.
 */
const PEFT_MODULE_NAMES = new Map<string, (path: string) => string>([
  ["qwen2_5_vl", qwen25VLPeftModuleName],
  ["qwen3_vl", qwen3VLPeftModuleName],
  ["glm4v", glm4vPeftModuleName],
  ["internvl", internVLPeftModuleName],
]);

/**
 * model_type -> a weight's name as transformers' class saves it, from vagen's checkpoint
 * name, where transformers would not load vagen's (`vagen export` writes these).
 */
const EXPORT_WEIGHT_NAMES = new Map<string, (name: string) => string>([
  ["qwen3_vl", qwen3VLCheckpointName],
  ["internvl", internVLCheckpointName],
  ["glm4v", glm4vCheckpointName],
]);

function modelTypeOf(dir: string): string {
  const cfgPath = join(dir, "config.json");
  if (!existsSync(cfgPath)) throw new VagenError(`${cfgPath}: file not found`, "pass a Hugging Face model directory (config.json, *.safetensors, tokenizer.json)");
  return String(readJson(cfgPath).model_type);
}

/** How `vagen export` names the weights of the model directory's family (identity where transformers loads vagen's names). */
export function exportWeightNamer(dir: string): (name: string) => string {
  return EXPORT_WEIGHT_NAMES.get(modelTypeOf(dir)) ?? ((name) => name);
}

/** The module namer of the model directory's family for PEFT adapter keys (identity where the names agree). */
export function peftModuleNamer(dir: string): (path: string) => string {
  return PEFT_MODULE_NAMES.get(modelTypeOf(dir)) ?? ((path) => path);
}

/** Registers (or replaces) the family that loads directories of this `model_type`. */
export function registerModelFamily(modelType: string, load: FamilyLoader): void {
  FAMILIES.set(modelType, load);
}

export function supportedModelTypes(): string[] {
  return [...FAMILIES.keys()];
}

/** Reads `dir/config.json`'s model_type and loads the directory with its family. */
export function loadModelFamily(dir: string, opts: LoadModelOptions): ModelFamily {
  const cfgPath = join(dir, "config.json");
  if (!existsSync(cfgPath)) throw new VagenError(`${cfgPath}: file not found`, "pass a Hugging Face model directory (config.json, *.safetensors, tokenizer.json)");
  const modelType = readJson(cfgPath).model_type;
  const load = FAMILIES.get(String(modelType));
  if (!load) {
    throw new VagenError(`${cfgPath}: key "model_type": got ${JSON.stringify(modelType)}, expected one of ${supportedModelTypes().join(", ")}`);
  }
  return load(dir, opts);
}
