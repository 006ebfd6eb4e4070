/**
 * `model.backend: engine`: eval runs a model directory in-process (the tiny Qwen2.5-VL
 * fixture on the CPU) with no server, and the client returns exact token ids and
 * log-probs.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { createClient, ModelConfig } from "../../src/clients/index.ts";
import { tempDir } from "./helpers.ts";

const TINY = join(import.meta.dir, "..", "fixtures", "qwen2_5_vl_tiny");
const ROOT = join(import.meta.dir, "..", "..");

test("the engine backend answers with token ids and log-probs of every generated token", async () => {
  const config = v.parse(ModelConfig, { backend: "engine", model_dir: TINY, engine: { device: "cpu", max_seq_len: 512 }, sampling: { temperature: 0, max_tokens: 6 } });
  const client = createClient(config);
  try {
    const answer = await client.create([{ role: "user", content: [{ type: "text", text: "Where is the box?" }] }], {});
    expect(answer.tokenIds).toBeDefined();
    expect(answer.tokenIds!.length).toBeGreaterThan(0);
    expect(answer.tokenIds!.length).toBeLessThanOrEqual(6);
    expect(answer.logprobs).toHaveLength(answer.tokenIds!.length);
    for (const lp of answer.logprobs!) expect(lp).toBeLessThanOrEqual(0);
    expect(answer.usage?.completionTokens).toBe(answer.tokenIds!.length);
    // greedy: the same question gets the same tokens
    const again = await client.create([{ role: "user", content: [{ type: "text", text: "Where is the box?" }] }], {});
    expect(again.tokenIds).toEqual(answer.tokenIds);
  } finally {
    await client.close?.();
  }
}, 60_000);

test("vagen eval runs examples/eval/quickstart.yaml in-process and writes every episode", () => {
  const out = tempDir();
  try {
    const p = Bun.spawnSync(
      ["bun", "src/cli/main.ts", "eval", "examples/eval/quickstart.yaml", `output_dir=${out.path}`, "envs.sokoban_vision.episodes=1", "envs.frozenlake_text.episodes=1", "envs.sokoban_vision.max_turns=2", "model.sampling.max_tokens=8"],
      { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env } },
    );
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const summary = JSON.parse(readFileSync(join(out.path, "summary.json"), "utf8"));
    const rows = JSON.stringify(summary);
    expect(rows).toContain("sokoban_vision");
    expect(rows).toContain("frozenlake_text");
    expect(existsSync(join(out.path, "sokoban_vision", "seed_0", "images"))).toBe(true);
    const metrics = JSON.parse(readFileSync(join(out.path, "sokoban_vision", "seed_0", "metrics.json"), "utf8"));
    expect(metrics.model).toBe("engine:qwen2_5_vl_tiny");
    expect(metrics.num_turns).toBe(2);
    expect(metrics.usage.completion_tokens).toBeGreaterThan(0);
  } finally {
    out.cleanup();
  }
}, 120_000);
