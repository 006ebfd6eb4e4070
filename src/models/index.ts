/**
 * Model families and how to load a model directory. The family is chosen by
 * config.json's `model_type`; everything above this module talks to `ChatModel`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { VagenError } from "../core/errors.ts";
import type { ChatModel, LoadModelOptions, ModelFamily } from "./family.ts";
import { Qwen25VLChatModel } from "./qwen2_5_vl/chat-model.ts";
import { readJson } from "./tokenizer.ts";

export type { ChatModel, DecodeSession, LoadModelOptions, ModelFamily, PromptInput } from "./family.ts";
export { generate, type GenerateOptions, type Generation } from "./generation.ts";
export { TextTokenizer } from "./tokenizer.ts";
export { ChatTemplate, toTemplateMessages, type TemplateMessage, type TemplateContentPart } from "./chat-template.ts";
export { ConcatKVCache, type KVCache } from "./kv-cache.ts";
export { ValueHead } from "./value-head.ts";
export { readPng } from "./image-io.ts";
export { Qwen25VLModel } from "./qwen2_5_vl/model.ts";
export { Qwen25VLChatModel } from "./qwen2_5_vl/chat-model.ts";

const FAMILIES: ModelFamily[] = [
  { modelTypes: ["qwen2_5_vl"], load: (dir, opts) => Qwen25VLChatModel.load(dir, opts) },
];

export function registerModelFamily(family: ModelFamily): void {
  FAMILIES.push(family);
}

export function supportedModelTypes(): string[] {
  return FAMILIES.flatMap((f) => [...f.modelTypes]);
}

/** Read `dir/config.json`'s model_type and load the directory with its family. */
export function loadChatModel(dir: string, opts: LoadModelOptions): ChatModel {
  const cfgPath = join(dir, "config.json");
  if (!existsSync(cfgPath)) throw new VagenError(`${cfgPath}: file not found`, "pass a Hugging Face model directory (config.json, *.safetensors, tokenizer.json)");
  const modelType = readJson(cfgPath).model_type;
  const family = FAMILIES.find((f) => f.modelTypes.includes(String(modelType)));
  if (!family) {
    throw new VagenError(`${cfgPath}: key "model_type": got ${JSON.stringify(modelType)}, expected one of ${supportedModelTypes().join(", ")}`);
  }
  return family.load(dir, opts);
}
