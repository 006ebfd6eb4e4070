/** `vagen serve MODEL_DIR`: an OpenAI-compatible chat API over the in-process engine. */
import type { Command } from "commander";
import { VagenError } from "../../core/errors.ts";
import { checkExposure } from "../../serve/auth.ts";
import { integerFlag, jsonObjectFlag, numberFlag } from "../flags.ts";

interface ServeFlags {
  port: number;
  host: string;
  apiKey?: string;
  insecure?: boolean;
  quiet?: boolean;
  servedModelName?: string[];
  device?: string;
  dtype?: string;
  maxSeqLen: number;
  kvCacheGib?: number;
  maxSlots: number;
  attention: string;
  chatTemplateKwargs?: Record<string, unknown>;
  maxBodyMib: number;
  maxPromptTokens?: number;
  maxImagePixels: number;
  maxRequestPixels: number;
}

/** The dtypes serve (and the engine config's `dtype`) accept. */
const DTYPES = ["f32", "bf16", "f16"] as const;

export function register(program: Command): void {
  program
    .command("serve")
    .description("serve a model directory over an OpenAI-compatible /v1/chat/completions API")
    .argument("<model_dir>", "Hugging Face model directory (config.json, safetensors, tokenizer)")
    .option("--port <port>", "port to listen on", integerFlag("port", { min: 0 }), 8000)
    .option("--host <host>", "address to bind (an address other machines reach needs --api-key or --insecure)", "127.0.0.1")
    .option("--api-key <key>", "require this key as an Authorization: Bearer header (default: $VAGEN_API_KEY; the variable keeps it out of `ps`)")
    .option("--insecure", "allow a non-loopback --host without an API key")
    .option("--quiet", "no per-request log lines (server errors are still logged)")
    .option(
      "--served-model-name <name>",
      "a name clients may give as `model` (repeatable; default: the directory's name)",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option("--device <device>", 'device ("cuda", "cuda:1", "cpu"; default: cuda when available)')
    .option("--dtype <dtype>", `compute dtype: ${DTYPES.join(", ")} (default: bf16 on CUDA, f32 on the CPU)`)
    .option("--max-seq-len <tokens>", "tokens one conversation may hold", integerFlag("max-seq-len", { min: 16 }), 8192)
    .option("--kv-cache-gib <gib>", "memory for the KV cache in GiB (default: 16 on CUDA, 1 on the CPU)", numberFlag("kv-cache-gib", { above: 0 }))
    .option("--max-slots <n>", "most conversations holding a KV cache at once", integerFlag("max-slots", { min: 1 }), 512)
    .option("--attention <kind>", "fused (libtorch's SDPA kernels) or math (the unfused fallback)", "fused")
    .option("--chat-template-kwargs <json>", 'variables of every chat-template rendering, e.g. \'{"enable_thinking": false}\' (default: the template\'s own)', jsonObjectFlag("chat-template-kwargs"))
    .option("--max-body-mib <mib>", "largest request body in MiB (413 beyond it)", numberFlag("max-body-mib", { above: 0 }), 32)
    .option(
      "--max-prompt-tokens <tokens>",
      "most prompt tokens per request, images included (default: what a KV slot holds, less one)",
      integerFlag("max-prompt-tokens", { min: 1 }),
    )
    .option("--max-image-pixels <n>", "most pixels per image, checked before decoding", integerFlag("max-image-pixels", { min: 1 }), 4096 * 4096)
    .option("--max-request-pixels <n>", "most pixels of all images in one request", integerFlag("max-request-pixels", { min: 1 }), 4 * 4096 * 4096)
    .action(async (modelDir: string, flags: ServeFlags) => {
      const port = flags.port;
      const apiKey = flags.apiKey ?? (process.env.VAGEN_API_KEY || undefined);
      checkExposure(flags.host, apiKey, flags.insecure === true);
      if (flags.dtype !== undefined && !(DTYPES as readonly string[]).includes(flags.dtype)) {
        throw new VagenError(`--dtype: expected ${DTYPES.join(", ")}, got "${flags.dtype}"`);
      }
      if (flags.attention !== "fused" && flags.attention !== "math") {
        throw new VagenError(`--attention: expected fused or math, got "${flags.attention}"`);
      }
      const limits = {
        maxBodyBytes: Math.floor(flags.maxBodyMib * 2 ** 20),
        maxPromptTokens: flags.maxPromptTokens,
        maxImagePixels: flags.maxImagePixels,
        maxRequestPixels: flags.maxRequestPixels,
      };
      // Loaded here, not at startup: commands that never touch tensors must not need libtorch.
      const { describePlan, loadEngine } = await import("../../engine/load.ts");
      const { startServer } = await import("../../serve/server.ts");
      // Loading the weights (and on CUDA, capturing graphs) takes seconds: say so before the wait.
      process.stderr.write(`vagen serve: loading ${modelDir} ...\n`);
      const loaded = loadEngine(modelDir, {
        device: flags.device,
        dtype: flags.dtype as (typeof DTYPES)[number] | undefined,
        max_seq_len: flags.maxSeqLen,
        kv_cache_gib: flags.kvCacheGib,
        max_slots: flags.maxSlots,
        attention: flags.attention,
        chat_template_kwargs: flags.chatTemplateKwargs,
      });
      let server: ReturnType<typeof startServer>;
      try {
        server = startServer({
          engine: loaded.engine,
          builder: loaded.builder,
          host: flags.host,
          port,
          apiKey,
          servedModelNames: flags.servedModelName,
          limits,
          log: { quiet: flags.quiet === true },
        });
      } catch (e) {
        await loaded.close();
        throw e;
      }
      process.stderr.write(
        `vagen serve: model "${flags.servedModelName?.[0] ?? loaded.builder.modelName}" on ${loaded.model.spec.device} (${loaded.model.spec.dtype}); ` +
          `${describePlan(loaded.model, loaded.plan)}\n` +
          `listening on http://${server.hostname}:${server.port}/v1${apiKey ? " (API key required)" : ""}\n`,
      );
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      server.stop(true);
      await loaded.close();
    });
}
