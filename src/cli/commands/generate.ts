/**
 * `vagen generate MODEL_DIR --prompt TEXT [--image PNG]...`: load a Hugging Face model
 * directory in-process, apply its chat template, and generate one reply on the engine
 * (the same scheduler, KV cache and sampler as `vagen serve` and `vagen eval`).
 * `--json` prints {"text", "token_ids", "logprobs"}.
 */
import type { Command } from "commander";
import { closeSync, existsSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { VagenError } from "../../core/errors.ts";
import type { ChatMessage, ContentPart } from "../../core/chat.ts";
import type { DType } from "../../torch/index.ts";
import { integerFlag, jsonObjectFlag, numberFlag } from "../flags.ts";

interface GenerateFlags {
  prompt: string;
  image: string[];
  system?: string;
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  device?: string;
  dtype?: string;
  chatTemplateKwargs?: Record<string, unknown>;
  json?: boolean;
}

/** The dtypes `vagen serve` accepts too. */
const DTYPES = ["f32", "bf16", "f16"] as const;
const DEVICE = /^(cpu|cuda(:\d+)?)$/;
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** What a file's first bytes say it is, for a better message than a PNG decoder's. */
function sniffFormat(head: Uint8Array): string | undefined {
  if (head[0] === 0xff && head[1] === 0xd8) return "JPEG";
  if (head[0] === 0x47 && head[1] === 0x49 && head[2] === 0x46) return "GIF";
  if (head[0] === 0x52 && head[1] === 0x49 && head[2] === 0x46 && head[3] === 0x46) return "RIFF (WebP?)";
  if (head[0] === 0x42 && head[1] === 0x4d) return "BMP";
  return undefined;
}

/** Check an `--image` path before anything is loaded: it exists, and it is a PNG. */
export function checkImageFlag(path: string): void {
  if (!existsSync(path)) throw new VagenError(`--image ${path}: file not found`);
  const head = new Uint8Array(8);
  const fd = openSync(path, "r");
  let read: number;
  try {
    read = readSync(fd, head, 0, 8, 0);
  } finally {
    closeSync(fd);
  }
  if (read < 8 || PNG_SIGNATURE.some((b, i) => head[i] !== b)) {
    const format = sniffFormat(head);
    throw new VagenError(`--image ${path}: not a PNG file${format ? ` (it looks like ${format})` : ""}`, "only PNG images are supported; convert it first");
  }
}

type Torch = typeof import("../../torch/index.ts");

/**
 * Some libtorch builds (Debian's 1.13) have no half-precision matmul on the CPU; say so
 * before loading a model rather than failing inside it with libtorch's raw message.
 */
function checkDtypeRuns(torch: Torch, device: string, dtype: DType): void {
  try {
    torch.tidy(() => torch.ones([2, 2], { dtype, device }).matmul(torch.ones([2, 2], { dtype, device })));
  } catch (err) {
    throw new VagenError(`--dtype ${dtype}: this libtorch cannot multiply ${dtype} matrices on ${device} (${(err as Error).message})`, "use --dtype f32 or bf16 on the CPU, f16 on CUDA");
  }
}

/** The model's position limit from config.json (top level or text_config), if it says. */
function maxPositions(modelDir: string, readJson: (path: string) => Record<string, unknown>): number | undefined {
  const config = readJson(join(modelDir, "config.json"));
  const text = config.text_config as Record<string, unknown> | undefined;
  const limit = config.max_position_embeddings ?? text?.max_position_embeddings;
  return typeof limit === "number" && limit > 0 ? limit : undefined;
}

export function register(program: Command): void {
  program
    .command("generate")
    .description("generate a reply from a local Hugging Face model directory (text and images), in-process")
    .argument("<model-dir>", "model directory: config.json, *.safetensors, tokenizer.json")
    .requiredOption("--prompt <text>", "the user message")
    .option("--image <png>", "an image shown before the prompt (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option("--system <text>", "system message (default: the chat template's)")
    .option("--max-tokens <n>", "tokens to generate at most", integerFlag("max-tokens", { min: 1 }), 128)
    .option("--temperature <t>", "sampling temperature; 0 is greedy", numberFlag("temperature", { min: 0 }), 0)
    .option("--top-p <p>", "nucleus sampling mass", numberFlag("top-p", { above: 0, max: 1 }), 1)
    .option("--seed <s>", "sampling seed", integerFlag("seed"), 0)
    .option("--device <device>", 'device ("cuda", "cuda:1", "cpu"; default: cuda when available)')
    .option("--dtype <dtype>", "compute dtype: f32, bf16 or f16 (default: bf16 on CUDA, f32 on the CPU)")
    .option("--chat-template-kwargs <json>", 'variables of the chat-template rendering, e.g. \'{"enable_thinking": false}\' (default: the template\'s own)', jsonObjectFlag("chat-template-kwargs"))
    .option("--json", "print {text, token_ids, logprobs} as JSON")
    .action(async (dir: string, flags: GenerateFlags) => {
      if (flags.device !== undefined && !DEVICE.test(flags.device)) {
        throw new VagenError(`--device: got ${JSON.stringify(flags.device)}, expected cpu, cuda or cuda:N`);
      }
      if (flags.dtype !== undefined && !(DTYPES as readonly string[]).includes(flags.dtype)) {
        throw new VagenError(`--dtype: got ${JSON.stringify(flags.dtype)}, expected ${DTYPES.join(", ")}`);
      }
      for (const path of flags.image) checkImageFlag(path);
      // Loaded here, not at startup: commands that never touch tensors must not need libtorch.
      const { loadModelFamily, readPng } = await import("../../models/index.ts");
      const { readJson } = await import("../../models/tokenizer.ts");
      const { createEngine, resolveDevice } = await import("../../engine/load.ts");
      const { kvBytesPerToken } = await import("../../engine/kv-cache.ts");
      // The same device check (and hint) as `vagen serve`.
      const device = resolveDevice(flags.device);
      const dtype = (flags.dtype ?? (String(device).startsWith("cuda") ? "bf16" : "f32")) as DType;
      checkDtypeRuns(await import("../../torch/index.ts"), String(device), dtype);
      const images = flags.image.map(readPng);
      const model = loadModelFamily(dir, { device, dtype, chatTemplateVariables: flags.chatTemplateKwargs });
      try {
        const content: ContentPart[] = [...images.map((image) => ({ type: "image" as const, image })), { type: "text", text: flags.prompt }];
        const messages: ChatMessage[] = [
          ...(flags.system !== undefined ? [{ role: "system" as const, content: [{ type: "text" as const, text: flags.system }] }] : []),
          { role: "user", content },
        ];
        const prompt = model.buildPrompt(messages);
        const promptTokens = prompt.tokenIds.length;
        const limit = maxPositions(dir, readJson as (path: string) => Record<string, unknown>);
        if (limit !== undefined && promptTokens + flags.maxTokens > limit) {
          throw new VagenError(
            `--max-tokens: got ${flags.maxTokens}, but the prompt is ${promptTokens} tokens and the model holds ${limit} positions (config.json max_position_embeddings)`,
            `at most ${Math.max(0, limit - promptTokens)} new tokens fit after this prompt`,
          );
        }
        // One sequence: a KV cache of exactly one slot (plus the engine's scratch slot).
        const seqLen = Math.max(16, promptTokens + flags.maxTokens);
        const kvGib = (2 * seqLen * kvBytesPerToken(model.spec)) / 2 ** 30;
        const { engine, close } = createEngine(model, { max_seq_len: seqLen, max_slots: 1, kv_cache_gib: kvGib * 1.01, seed: flags.seed });
        try {
          const out = await engine.generate({
            prompt,
            sampling: { temperature: flags.temperature, topP: flags.topP, seed: flags.seed, maxNewTokens: flags.maxTokens },
          });
          if (flags.json) {
            process.stdout.write(`${JSON.stringify({ text: out.text, token_ids: out.tokenIds, logprobs: out.logprobs })}\n`);
          } else {
            process.stdout.write(`${out.text}\n`);
          }
        } finally {
          await close();
        }
      } finally {
        model.dispose();
      }
    });
}
