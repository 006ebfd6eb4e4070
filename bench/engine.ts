/**
 * Engine benchmark (GPU): decode tokens/s at several batch sizes, prefill tokens/s, the
 * memory-bandwidth roofline, and 5-turn episodes with and without session reuse, on a
 * model directory (the Qwen2.5-VL-3B configuration with random weights, written by
 * bench/python/engine_reference.py, which also times transformers' generate on the same
 * weights).
 *
 *   bun bench/engine.ts --model DIR [--hf hf.json] [--out engine.json]
 *
 * Prompts are random token ids (fixed seed); generation ignores stop tokens so every
 * configuration produces exactly the tokens it asks for.
 */
import { parseArgs } from "node:util";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import * as torch from "../src/torch/index.ts";
import { loadEngine, describePlan } from "../src/engine/load.ts";
import { kvBytesPerToken } from "../src/engine/kv-cache.ts";
import { Engine } from "../src/engine/engine.ts";
import { ModelRunner } from "../src/engine/model-runner.ts";
import type { Prompt } from "../src/engine/types.ts";
import type { ChatPromptBuilder } from "../src/engine/chat.ts";
import type { ChatMessage } from "../src/core/chat.ts";
import type { RGBImage } from "../src/core/image.ts";

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    hf: { type: "string" },
    out: { type: "string", default: "engine-bench.json" },
    batches: { type: "string", default: "1,16,64,256" },
    "prompt-len": { type: "string", default: "128" },
    /** Prompt length of one more decode measurement at batch 64 (long contexts); 0 skips it. */
    "long-prompt": { type: "string", default: "1024" },
    "new-tokens": { type: "string", default: "128" },
    episodes: { type: "string", default: "64" },
    "kv-gib": { type: "string", default: "40" },
    /** "cpu" runs the same code on a tiny model to check the script, not to measure. */
    device: { type: "string", default: "cuda" },
    "prefill-len": { type: "string", default: "1024" },
    "episode-prompt": { type: "string", default: "512" },
    /** Side of the square observation image in the image episodes (0 skips them). */
    "episode-image": { type: "string", default: "336" },
    /** "math" where libtorch's fused attention kernels are unusable. */
    attention: { type: "string", default: "fused" },
    /** "off" runs the composite libtorch ops instead of vagen's fused CUDA kernels. */
    "fused-kernels": { type: "string", default: "on" },
  },
});
if (!args.model) throw new Error("--model DIR is required");

const DEVICE = args.device as torch.Device;
const ON_CUDA = String(DEVICE).startsWith("cuda");
const sync = () => {
  if (ON_CUDA) torch.cuda.synchronize();
};
const PROMPT_LEN = Number(args["prompt-len"]);
const NEW_TOKENS = Number(args["new-tokens"]);
/**
 * Prompt ids stay below this: ordinary text ids, clear of the special ids (which sit at
 * the top of Qwen vocabularies). Set from the model's vocabulary once it is loaded.
 */
let TEXT_ID_BOUND = 150000;

/** A deterministic 32-bit xorshift stream. */
function xorshift(seed: number): () => number {
  let x = (seed * 2654435761) >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>>= 0);
  };
}

/** Deterministic pseudo-random token ids, clear of the special ids. */
function randomIds(n: number, seed: number): number[] {
  const next = xorshift(seed);
  return Array.from({ length: n }, () => next() % TEXT_ID_BOUND);
}

const textPrompt = (ids: number[]): Prompt => ({ tokenIds: ids, images: [] });
const now = () => performance.now();
const log = (msg: string) => process.stderr.write(`[engine-bench] ${msg}\n`);

/** Device copy bandwidth (bytes read + written per second) of a large buffer. */
function copyBandwidth(): number {
  const n = ON_CUDA ? 2 ** 30 : 2 ** 24; // 2 GiB of bf16 on the GPU
  const a = torch.keep(torch.zeros([n], { dtype: "bf16", device: DEVICE }));
  const b = torch.keep(torch.zeros([n], { dtype: "bf16", device: DEVICE }));
  b.copy_(a);
  sync();
  const reps = 10;
  const t0 = now();
  for (let i = 0; i < reps; i++) b.copy_(a);
  sync();
  const seconds = (now() - t0) / 1000;
  a.dispose();
  b.dispose();
  return (2 * 2 * n * reps) / seconds;
}

/**
 * Milliseconds the host spends inside the runner's decode: launching a step (graph replay,
 * sampling, the start of the readback) and collecting it (waiting for the device, reading
 * the tokens). With overlapped steps the scheduler's work runs while the device computes.
 */
let runnerDecodeMs = 0;

interface DecodeResult {
  batch: number;
  promptLen: number;
  /** Per step: time inside the runner's decode; the rest of stepMs is the scheduler's host work. */
  runnerMs: number;
  decodeTokensPerS: number;
  totalTokensPerS: number;
  stepMs: number;
  meanContext: number;
  rooflineTokensPerS: number;
  rooflineFraction: number;
}

async function benchDecode(
  engine: Engine,
  batch: number,
  weightBytes: number,
  kvPerToken: number,
  bandwidth: number,
  promptLen = PROMPT_LEN,
): Promise<DecodeResult> {
  const firstTimes: number[] = [];
  const lastTimes: number[] = [];
  let counted = 0;
  const runnerBefore = runnerDecodeMs;
  const stepsBefore = engine.stats().decodeSteps;
  const t0 = now();
  await Promise.all(
    Array.from({ length: batch }, (_, i) => {
      let first = -1;
      return engine
        .generate({
          prompt: textPrompt(randomIds(promptLen, 1000 + i)),
          sampling: { temperature: 0, maxNewTokens: NEW_TOKENS, ignoreStopTokens: true },
          onToken: () => {
            const t = now();
            if (first < 0) first = t;
            else counted++;
            lastTimes[i] = t;
          },
        })
        .then(() => firstTimes.push(first));
    }),
  );
  const total = (now() - t0) / 1000;
  const decodeStart = Math.max(...firstTimes);
  const decodeEnd = Math.max(...lastTimes);
  const decodeSeconds = (decodeEnd - decodeStart) / 1000;
  // Tokens after every sequence has started decoding, i.e. inside the timed window.
  const steps = NEW_TOKENS - 1;
  const decodeTokens = batch * steps;
  const meanContext = promptLen + NEW_TOKENS / 2;
  const stepBytes = weightBytes + batch * meanContext * kvPerToken;
  const rooflineStep = stepBytes / bandwidth;
  const rooflineTokensPerS = batch / rooflineStep;
  const decodeTokensPerS = decodeTokens / decodeSeconds;
  void counted;
  return {
    batch,
    promptLen,
    runnerMs: (runnerDecodeMs - runnerBefore) / (engine.stats().decodeSteps - stepsBefore),
    decodeTokensPerS,
    totalTokensPerS: (batch * NEW_TOKENS) / total,
    stepMs: (decodeSeconds / steps) * 1000,
    meanContext,
    rooflineTokensPerS,
    rooflineFraction: decodeTokensPerS / rooflineTokensPerS,
  };
}

/** Milliseconds of one CUDA-graph decode replay (inputs copied in, no sampling, no scheduler). */
function graphReplayMs(runner: ModelRunner, batch: number): number | undefined {
  const graphs = runner.graphs;
  if (!graphs || !graphs.bucketFor(batch)) return undefined;
  const rows = Array.from({ length: batch }, (_, i) => ({ tokenId: 1, position: 191, slot: i, index: 191 }));
  const once = () => torch.tidy(() => void graphs.run(rows));
  once();
  sync();
  const reps = 20;
  const t0 = now();
  for (let i = 0; i < reps; i++) once();
  sync();
  return (now() - t0) / reps;
}

async function benchPrefill(engine: Engine, batch: number, length: number) {
  // Warm the shapes once, then time.
  await Promise.all(Array.from({ length: batch }, (_, i) => engine.generate({ prompt: textPrompt(randomIds(length, 50 + i)), sampling: { temperature: 0, maxNewTokens: 1 } })));
  const t0 = now();
  await Promise.all(Array.from({ length: batch }, (_, i) => engine.generate({ prompt: textPrompt(randomIds(length, 70 + i)), sampling: { temperature: 0, maxNewTokens: 1 } })));
  const seconds = (now() - t0) / 1000;
  return { batch, promptLen: length, seconds, tokensPerS: (batch * length) / seconds };
}

/**
 * Runs `episodes` episodes at once (each a chain of turns, `play(e, sessionId)`), with a
 * session per episode when `reuse` is set, and counts what the engine did meanwhile.
 */
async function runEpisodes(engine: Engine, episodes: number, reuse: boolean, play: (e: number, sessionId: string | undefined) => Promise<void>) {
  const before = engine.stats();
  const t0 = now();
  await Promise.all(
    Array.from({ length: episodes }, async (_, e) => {
      const sessionId = reuse ? `episode-${e}` : undefined;
      await play(e, sessionId);
      if (sessionId) engine.releaseSession(sessionId);
    }),
  );
  const seconds = (now() - t0) / 1000;
  const after = engine.stats();
  return {
    episodes,
    reuse,
    seconds,
    prefillTokens: after.prefillTokens - before.prefillTokens,
    cachedPromptTokens: after.cachedPromptTokens - before.cachedPromptTokens,
    decodeTokens: after.decodeTokens - before.decodeTokens,
  };
}

/** E episodes of `turns` turns: a first prompt, then each turn adds the reply and a new observation. */
async function benchEpisodes(engine: Engine, episodes: number, turns: number, reuse: boolean) {
  const stats = await runEpisodes(engine, episodes, reuse, async (e, sessionId) => {
    let ids = randomIds(Number(args["episode-prompt"]), 5000 + e);
    for (let turn = 0; turn < turns; turn++) {
      const r = await engine.generate({ prompt: textPrompt(ids), sessionId, sampling: { temperature: 0, maxNewTokens: 64, ignoreStopTokens: true } });
      // A random-weight model can emit special ids (even the image placeholder); the
      // conversation carries the reply as ordinary text ids, as a re-rendered chat would.
      const reply = r.tokenIds.map((t) => t % TEXT_ID_BOUND);
      ids = [...ids, ...reply, ...randomIds(192, 9000 + e * 16 + turn)];
    }
  });
  return { ...stats, turns };
}

/** A deterministic noise image (every observation differs, as an env's frames would). */
function noiseImage(side: number, seed: number): RGBImage {
  const next = xorshift(seed);
  const data = new Uint8Array(side * side * 3);
  for (let i = 0; i < data.length; i++) data[i] = next() & 255;
  return { width: side, height: side, data };
}

/**
 * The same episodes with an image in every observation, as a VLM agent sees them: the
 * conversation is re-rendered through the chat template each turn (replies as decoded
 * text), so with session reuse a turn prefills from where the re-tokenized reply first
 * differs, and without it every earlier image goes through the vision tower again.
 */
async function benchImageEpisodes(engine: Engine, builder: ChatPromptBuilder, visionCalls: () => number, episodes: number, turns: number, reuse: boolean, side: number) {
  // The observations exist before the clock starts: an environment renders them, and
  // what is timed here is the engine.
  const images = Array.from({ length: episodes }, (_, e) => Array.from({ length: turns + 1 }, (_, turn) => noiseImage(side, 7000 + e * 16 + turn)));
  const visionBefore = visionCalls();
  const stats = await runEpisodes(engine, episodes, reuse, async (e, sessionId) => {
    const observe = (turn: number): ChatMessage => ({
      role: "user",
      content: [
        { type: "image", image: images[e]![turn]! },
        { type: "text", text: `Turn ${turn}. The box is left of the target; push it and answer with <answer>Left</answer> or similar.` },
      ],
    });
    const messages: ChatMessage[] = [{ role: "system", content: [{ type: "text", text: "You are a Sokoban agent." }] }, observe(0)];
    for (let turn = 0; turn < turns; turn++) {
      const r = await engine.generate({ prompt: builder.buildPrompt(messages), sessionId, sampling: { temperature: 0, maxNewTokens: 64, ignoreStopTokens: true } });
      messages.push({ role: "assistant", content: [{ type: "text", text: r.text }] }, observe(turn + 1));
    }
  });
  return { ...stats, turns, imageSide: side, imagesEncoded: visionCalls() - visionBefore };
}

async function main() {
  torch.F.fusedKernels(args["fused-kernels"] !== "off");
  const info = torch.torchInfo();
  log(`torch ${info.torchVersion}, cuda devices ${info.cudaDevices}, fused attention ${info.fusedAttention}, fused kernels ${info.fusedKernels}`);
  const tLoad = now();
  const loaded = loadEngine(args.model!, { device: DEVICE, dtype: ON_CUDA ? "bf16" : "f32", max_seq_len: 2048, kv_cache_gib: Number(args["kv-gib"]), max_slots: 320, max_prefill_tokens: 8192, attention: args.attention as "fused" | "math" });
  const loadSeconds = (now() - tLoad) / 1000;
  const { engine, model: adapter, plan } = loaded;
  // decode() is launchDecode() + collect(), so timing those two covers every decode step.
  const launch = loaded.runner.launchDecode.bind(loaded.runner);
  loaded.runner.launchDecode = (items) => {
    const t = now();
    const pending = launch(items);
    runnerDecodeMs += now() - t;
    return {
      collect: () => {
        const t1 = now();
        try {
          return pending.collect();
        } finally {
          runnerDecodeMs += now() - t1;
        }
      },
    };
  };
  TEXT_ID_BOUND = Math.min(TEXT_ID_BOUND, Math.floor(adapter.spec.vocabSize * 0.9));
  log(`loaded in ${loadSeconds.toFixed(1)}s; ${describePlan(adapter, plan)}; decode weights ${(adapter.spec.weightBytes / 2 ** 30).toFixed(2)} GiB`);
  const bandwidth = copyBandwidth();
  log(`copy bandwidth ${(bandwidth / 1e12).toFixed(2)} TB/s`);
  const kvPerToken = kvBytesPerToken(adapter.spec);

  // Warm-up: kernels, graph captures of the small buckets.
  await engine.generate({ prompt: textPrompt(randomIds(64, 1)), sampling: { temperature: 0, maxNewTokens: 8, ignoreStopTokens: true } });

  const decode: (DecodeResult & { graphReplayMs?: number })[] = [];
  for (const b of args.batches!.split(",").map(Number)) {
    await benchDecode(engine, b, adapter.spec.weightBytes, kvPerToken, bandwidth); // captures this bucket's graphs
    const r = await benchDecode(engine, b, adapter.spec.weightBytes, kvPerToken, bandwidth);
    const replay = graphReplayMs(loaded.runner, b);
    log(
      `decode batch ${b}: ${r.decodeTokensPerS.toFixed(0)} tok/s, ${r.stepMs.toFixed(2)} ms/step (runner ${r.runnerMs.toFixed(2)})` +
        `${replay === undefined ? "" : ` (graph replay ${replay.toFixed(2)} ms)`}, ${(100 * r.rooflineFraction).toFixed(0)}% of roofline`,
    );
    decode.push({ ...r, graphReplayMs: replay });
  }
  // Batch 64 again at long contexts, where reading the KV cache is a large part of a step.
  const longPrompt = Number(args["long-prompt"]);
  let longDecode: DecodeResult | undefined;
  if (longPrompt > 0) {
    const b = Math.min(64, Math.max(...decode.map((d) => d.batch)));
    await benchDecode(engine, b, adapter.spec.weightBytes, kvPerToken, bandwidth, longPrompt); // captures its window's graphs
    longDecode = await benchDecode(engine, b, adapter.spec.weightBytes, kvPerToken, bandwidth, longPrompt);
    log(
      `decode batch ${b} after ${longPrompt}-token prompts: ${longDecode.decodeTokensPerS.toFixed(0)} tok/s, ${longDecode.stepMs.toFixed(2)} ms/step ` +
        `(runner ${longDecode.runnerMs.toFixed(2)}), ${(100 * longDecode.rooflineFraction).toFixed(0)}% of roofline`,
    );
  }
  // The same decode without CUDA graphs (a second, small cache over the same weights).
  let eagerDecode: DecodeResult | undefined;
  if (ON_CUDA) {
    const eagerBatch = Math.min(64, Math.max(...decode.map((d) => d.batch)));
    const eager = new Engine(new ModelRunner(adapter, { slots: eagerBatch, slotTokens: 512, cudaGraphs: false, mathAttention: args.attention === "math" }), { decode: (ids) => loaded.builder.decode(ids) });
    await benchDecode(eager, eagerBatch, adapter.spec.weightBytes, kvPerToken, bandwidth);
    eagerDecode = await benchDecode(eager, eagerBatch, adapter.spec.weightBytes, kvPerToken, bandwidth);
    log(`decode batch ${eagerBatch} without CUDA graphs: ${eagerDecode.decodeTokensPerS.toFixed(0)} tok/s, ${eagerDecode.stepMs.toFixed(2)} ms/step`);
    await eager.close();
  }
  const prefillLen = Number(args["prefill-len"]);
  const prefill = await benchPrefill(engine, 8, prefillLen);
  log(`prefill 8x${prefillLen}: ${prefill.tokensPerS.toFixed(0)} tok/s`);
  const episodes = Number(args.episodes);
  await benchEpisodes(engine, 8, 2, true); // warm-up
  const fresh = await benchEpisodes(engine, episodes, 5, false);
  const reused = await benchEpisodes(engine, episodes, 5, true);
  log(`5-turn episodes x${episodes}: re-prefill ${fresh.seconds.toFixed(2)}s, session reuse ${reused.seconds.toFixed(2)}s (${(fresh.seconds / reused.seconds).toFixed(2)}x)`);
  const side = Number(args["episode-image"]);
  let imageEpisodes: { fresh: unknown; reused: unknown; speedup: number } | undefined;
  if (side > 0) {
    const vision = () => (adapter as { imagesEncoded?: number }).imagesEncoded ?? 0;
    await benchImageEpisodes(engine, loaded.builder, vision, 4, 2, true, side); // warm-up
    const imgFresh = await benchImageEpisodes(engine, loaded.builder, vision, episodes, 5, false, side);
    const imgReused = await benchImageEpisodes(engine, loaded.builder, vision, episodes, 5, true, side);
    imageEpisodes = { fresh: imgFresh, reused: imgReused, speedup: imgFresh.seconds / imgReused.seconds };
    log(
      `5-turn image episodes x${episodes} (${side}x${side}): re-prefill ${imgFresh.seconds.toFixed(2)}s (${imgFresh.imagesEncoded} images encoded), ` +
        `session reuse ${imgReused.seconds.toFixed(2)}s (${imgReused.imagesEncoded} images encoded): ${imageEpisodes.speedup.toFixed(2)}x`,
    );
  }

  const hf = args.hf && existsSync(args.hf) ? JSON.parse(readFileSync(args.hf, "utf8")) : undefined;
  const result = {
    torch: info.torchVersion,
    attention: args.attention,
    fusedKernels: info.fusedKernels,
    gpu: ON_CUDA ? torch.cuda.getDeviceProperties(0).name : "cpu",
    loadSeconds,
    kvCache: plan,
    decodeWeightBytes: adapter.spec.weightBytes,
    kvBytesPerToken: kvPerToken,
    copyBandwidth: bandwidth,
    graphCaptures: loaded.runner.graphs?.captures ?? 0,
    graphsDisabled: loaded.runner.graphsDisabled,
    decode,
    longDecode,
    eagerDecode,
    prefill,
    episodes: { fresh, reused, speedup: fresh.seconds / reused.seconds },
    imageEpisodes,
    transformers: hf,
  };
  writeFileSync(args.out!, JSON.stringify(result, null, 2));
  if (hf) {
    for (const r of decode) {
      const h = (hf.generate as { batch: number; decode_tokens_per_s: number }[]).find((x) => x.batch === r.batch);
      if (h) log(`batch ${r.batch}: vagen ${r.decodeTokensPerS.toFixed(0)} vs transformers ${h.decode_tokens_per_s.toFixed(0)} decode tok/s (${(r.decodeTokensPerS / h.decode_tokens_per_s).toFixed(1)}x)`);
    }
  }
  await loaded.close();
}

await main();
