/**
 * `vagen generate MODEL_DIR --prompt TEXT [--image PNG]...`: load a Hugging Face model
 * directory in-process, apply its chat template, and generate with a KV-cached loop.
 * `--json` prints {"text", "token_ids", "logprobs"}.
 */
import type { Command } from "commander";
import { VagenError } from "../../errors.ts";
import type { ChatContentPart, ChatMessage } from "../../models/chat_template.ts";
import type { DType } from "../../torch/index.ts";

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
  json?: boolean;
}

function number(name: string, check: (n: number) => boolean, expected: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || !check(n)) throw new VagenError(`--${name}: got ${JSON.stringify(value)}, expected ${expected}`);
    return n;
  };
}

export function register(program: Command): void {
  program
    .command("generate")
    .description("generate a reply from a local Hugging Face model directory (text and images), in-process")
    .argument("<model-dir>", "model directory: config.json, *.safetensors, tokenizer.json")
    .requiredOption("--prompt <text>", "the user message")
    .option("--image <png>", "an image shown before the prompt (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option("--system <text>", "system message (default: the chat template's)")
    .option("--max-tokens <n>", "tokens to generate at most", number("max-tokens", (n) => Number.isInteger(n) && n >= 0, "a non-negative integer"), 128)
    .option("--temperature <t>", "sampling temperature; 0 is greedy", number("temperature", (n) => n >= 0, "a number >= 0"), 0)
    .option("--top-p <p>", "nucleus sampling mass", number("top-p", (n) => n > 0 && n <= 1, "a number in (0, 1]"), 1)
    .option("--seed <s>", "sampling seed", number("seed", Number.isInteger, "an integer"), 0)
    .option("--device <device>", "cuda or cpu (default: cuda when available)")
    .option("--dtype <dtype>", "bf16 or f32 (default: bf16 on cuda, f32 on cpu)")
    .option("--json", "print {text, token_ids, logprobs} as JSON")
    .action(async (dir: string, flags: GenerateFlags) => {
      // Loaded here, not at startup: commands that never touch tensors must not need libtorch.
      const { generate, loadChatModel, readPng } = await import("../../models/index.ts");
      const { torchInfo } = await import("../../torch/index.ts");
      const device = flags.device ?? (torchInfo().cudaDevices > 0 ? "cuda" : "cpu");
      if (device !== "cpu" && !device.startsWith("cuda")) throw new VagenError(`--device: got ${JSON.stringify(device)}, expected cuda or cpu`);
      const dtype = (flags.dtype ?? (device === "cpu" ? "f32" : "bf16")) as DType;
      if (dtype !== "bf16" && dtype !== "f32") throw new VagenError(`--dtype: got ${JSON.stringify(flags.dtype)}, expected bf16 or f32`);
      const images = flags.image.map(readPng);
      const model = loadChatModel(dir, { device, dtype });
      try {
        const content: ChatContentPart[] = [...images.map(() => ({ type: "image" as const })), { type: "text", text: flags.prompt }];
        const messages: ChatMessage[] = [...(flags.system !== undefined ? [{ role: "system" as const, content: flags.system }] : []), { role: "user", content }];
        const prompt = model.encodeChat(messages, images);
        const [out] = generate(model, [prompt], {
          maxTokens: flags.maxTokens,
          temperature: flags.temperature,
          topP: flags.topP,
          seed: flags.seed,
        });
        if (flags.json) {
          process.stdout.write(`${JSON.stringify({ text: out!.text, token_ids: out!.tokenIds, logprobs: out!.logprobs })}\n`);
        } else {
          process.stdout.write(`${out!.text}\n`);
        }
      } finally {
        model.dispose();
      }
    });
}
