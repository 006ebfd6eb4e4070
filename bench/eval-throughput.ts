/**
 * Eval pipeline overhead, without a model: how fast vagen turns observations into
 * requests and requests into finished episodes when the server answers instantly.
 *
 *   OMP_NUM_THREADS=2 bun bench/eval-throughput.ts
 *
 * 1. PNG data-URL encoding of observation images (fresh image objects, so no cache hits).
 * 2. Episodes per second through the full runner (env, harness, HTTP client, outputs)
 *    against the in-process fake OpenAI-compatible server from the tests:
 *    FrozenLake text answered with the BFS solution, and Sokoban vision (concat harness)
 *    answered with garbage for 5 turns, so every request re-sends the growing image list.
 */
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEnv } from "../envs/registry.ts";
import { createClient } from "../src/clients/config.ts";
import { imageToDataUrl } from "../src/clients/openai-wire.ts";
import { validate } from "../src/config/index.ts";
import { EvalConfig } from "../src/evaluation/config.ts";
import { buildEvalPlan } from "../src/evaluation/plan.ts";
import { runEvaluation } from "../src/evaluation/runner.ts";
import { garbageAnswer, solverAnswer } from "../test/eval/answerers.ts";
import { startFakeOpenAIServer, type WireRequest } from "../test/eval/fake-openai-server.ts";

function encodeBench(size: number, n: number): number {
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const data = new Uint8Array(size * size * 3);
    for (let p = 0; p < data.length; p++) data[p] = (p * 7 + i) & 0xff;
    imageToDataUrl({ width: size, height: size, data });
  }
  return (performance.now() - start) / n;
}

async function runnerBench(label: string, answer: (r: WireRequest) => string, envs: Record<string, unknown>): Promise<void> {
  const server = startFakeOpenAIServer({ answer });
  const out = join(tmpdir(), `vagen-bench-eval-${process.pid}-${label}`);
  const config = validate(EvalConfig, {
    output_dir: out,
    model: { backend: "openai", base_url: server.baseUrl, model: "bench", max_concurrency: 16 },
    run: { max_concurrent_episodes: 32, resume: false },
    envs,
  });
  const start = performance.now();
  const result = await runEvaluation(buildEvalPlan(config), { client: createClient(config.model), createEnv });
  const seconds = (performance.now() - start) / 1000;
  const requests = server.requests.length;
  const bytes = server.requests.reduce((s, r) => s + JSON.stringify(r.body).length, 0);
  await server.stop();
  rmSync(out, { recursive: true, force: true });
  console.log(
    `${label}: ${result.ran} episodes, ${requests} requests in ${seconds.toFixed(2)} s -> ${(result.ran / seconds).toFixed(1)} episodes/s, ${(requests / seconds).toFixed(0)} requests/s, mean request body ${(bytes / requests / 1024).toFixed(1)} KiB`,
  );
}

console.log(`PNG data URL, 96x96 (Sokoban tile image): ${encodeBench(96, 200).toFixed(3)} ms/image`);
console.log(`PNG data URL, 256x256 (FrozenLake image): ${encodeBench(256, 100).toFixed(3)} ms/image`);
await runnerBench("frozenlake text, solver, no_concat", solverAnswer, {
  fl: { name: "FrozenLake", config: { render_mode: "text" }, episodes: 400, max_turns: 5, harness: "no_concat" },
});
await runnerBench("sokoban vision, garbage x5 turns, concat", garbageAnswer, {
  sok: { name: "Sokoban", config: { render_mode: "vision", min_solution_steps: [1, 5] }, episodes: 100, seed_start: 10000, max_turns: 5 },
});
