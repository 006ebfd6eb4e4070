/** `vagen serve MODEL_DIR`: an OpenAI-compatible chat API over the in-process engine. */
import type { Command } from "commander";
import { VagenError } from "../../errors.ts";

interface ServeFlags {
  port: string;
  host: string;
  device?: string;
  dtype?: "f32" | "bf16" | "f16";
  maxSeqLen: string;
  kvCacheGib?: string;
  maxSlots: string;
  attention: string;
}

function integer(value: string, flag: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new VagenError(`${flag}: expected an integer >= ${min}, got "${value}"`);
  return n;
}

export function register(program: Command): void {
  program
    .command("serve")
    .description("serve a model directory over an OpenAI-compatible /v1/chat/completions API")
    .argument("<model_dir>", "Hugging Face model directory (config.json, safetensors, tokenizer)")
    .option("--port <port>", "port to listen on", "8000")
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--device <device>", 'device ("cuda", "cuda:1", "cpu"; default: cuda when available)')
    .option("--dtype <dtype>", "compute dtype: f32, bf16 or f16 (default: bf16 on CUDA, f32 on the CPU)")
    .option("--max-seq-len <tokens>", "tokens one conversation may hold", "8192")
    .option("--kv-cache-gib <gib>", "memory for the KV cache in GiB (default: 16 on CUDA, 1 on the CPU)")
    .option("--max-slots <n>", "most conversations holding a KV cache at once", "512")
    .option("--attention <kind>", "fused (libtorch's SDPA kernels) or math (the unfused fallback)", "fused")
    .action(async (modelDir: string, flags: ServeFlags) => {
      const port = integer(flags.port, "--port", 0);
      if (flags.dtype && !["f32", "bf16", "f16"].includes(flags.dtype)) {
        throw new VagenError(`--dtype: expected f32, bf16 or f16, got "${flags.dtype}"`);
      }
      if (flags.attention !== "fused" && flags.attention !== "math") {
        throw new VagenError(`--attention: expected fused or math, got "${flags.attention}"`);
      }
      const kvGib = flags.kvCacheGib === undefined ? undefined : Number(flags.kvCacheGib);
      if (kvGib !== undefined && !(kvGib > 0)) throw new VagenError(`--kv-cache-gib: expected a positive number, got "${flags.kvCacheGib}"`);
      // Loaded here, not at startup: commands that never touch tensors must not need libtorch.
      const { describePlan, loadEngine } = await import("../../engine/load.ts");
      const { startServer } = await import("../../engine/server.ts");
      const loaded = loadEngine(modelDir, {
        device: flags.device,
        dtype: flags.dtype,
        max_seq_len: integer(flags.maxSeqLen, "--max-seq-len", 16),
        kv_cache_gib: kvGib,
        max_slots: integer(flags.maxSlots, "--max-slots", 1),
        attention: flags.attention,
      });
      const server = startServer({ engine: loaded.engine, builder: loaded.builder, host: flags.host, port });
      process.stderr.write(
        `vagen serve: model "${loaded.builder.modelName}" on ${loaded.adapter.spec.device} (${loaded.adapter.spec.dtype}); ` +
          `${describePlan(loaded.adapter, loaded.plan)}\n` +
          `listening on http://${server.hostname}:${server.port}/v1\n`,
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
