import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import type { ChatMessage } from "../../src/core/chat.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { readPng } from "../../src/models/image-io.ts";
import { FIXTURE_DIR, refsJson } from "./fixture.ts";

/** Run the CLI in-process and capture what it prints. */
async function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const origOut = process.stdout.write.bind(process.stdout);
  const origErr = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((s: string) => (out.push(String(s)), true)) as typeof process.stdout.write;
  process.stderr.write = ((s: string) => (err.push(String(s)), true)) as typeof process.stderr.write;
  try {
    const code = await main(["bun", "vagen", ...args]);
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    process.stdout.write = origOut;
    process.stderr.write = origErr;
  }
}

describe("vagen generate", () => {
  const refs = refsJson();

  test("--json greedy output equals transformers' greedy generation (text prompt)", async () => {
    const c = refs.cases.text!;
    const { code, stdout } = await run(["generate", FIXTURE_DIR, "--prompt", "Describe a sunny day.", "--max-tokens", String(c.greedy!.length), "--device", "cpu", "--json"]);
    expect(code).toBe(0);
    const parsed = JSON.parse(stdout) as { text: string; token_ids: number[]; logprobs: number[] };
    expect(parsed.token_ids).toEqual(c.greedy!);
    expect(parsed.logprobs).toHaveLength(c.greedy!.length);
    expect(parsed.logprobs.every((l) => l <= 0 && Number.isFinite(l))).toBe(true);
    expect(typeof parsed.text).toBe("string");
  });

  test("an image prompt runs, and sampling with a seed is reproducible", async () => {
    const args = ["generate", FIXTURE_DIR, "--prompt", "What is in this picture?", "--image", join(FIXTURE_DIR, "images/a.png"), "--max-tokens", "5", "--temperature", "0.8", "--top-p", "0.9", "--seed", "7", "--device", "cpu", "--json"];
    const a = await run(args);
    const b = await run(args);
    expect(a.code).toBe(0);
    expect(JSON.parse(a.stdout).token_ids).toEqual(JSON.parse(b.stdout).token_ids);
  });

  test("generate samples as the engine does (serve and eval): same ids and log-probs for the same seed", async () => {
    const image = join(FIXTURE_DIR, "images/a.png");
    const prompt = "What is in this picture?";
    const cli = await run(["generate", FIXTURE_DIR, "--prompt", prompt, "--image", image, "--max-tokens", "6", "--temperature", "0.8", "--top-p", "0.9", "--seed", "11", "--device", "cpu", "--json"]);
    expect(cli.code).toBe(0);
    const printed = JSON.parse(cli.stdout) as { token_ids: number[]; logprobs: number[] };
    const loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.02, max_slots: 2 });
    try {
      const messages: ChatMessage[] = [{ role: "user", content: [{ type: "image", image: readPng(image) }, { type: "text", text: prompt }] }];
      const direct = await loaded.engine.generate({
        prompt: loaded.builder.buildPrompt(messages),
        sampling: { temperature: 0.8, topP: 0.9, seed: 11, maxNewTokens: 6 },
      });
      expect(printed.token_ids).toEqual(direct.tokenIds);
      printed.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(direct.logprobs[i]!, 5));
    } finally {
      await loaded.close();
    }
  });

  test("bad flags and directories are one-line errors", async () => {
    const bad = await run(["generate", FIXTURE_DIR, "--prompt", "x", "--top-p", "1.5", "--device", "cpu"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("--top-p");
    const missing = await run(["generate", "/nonexistent/model", "--prompt", "x", "--device", "cpu"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("config.json: file not found");
  });
});

describe("vagen generate with the Qwen3 text family", () => {
  const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
  const refs = refsJson(QWEN3_DIR);

  test("--json greedy output equals transformers' greedy tokens (thinking-mode prompt), up to and with <|im_end|>", async () => {
    const greedy = refs.cases.single!.greedy!;
    // The fixture's tenth greedy token is <|im_end|> (id 362): generation stops there.
    const stop = greedy.indexOf(362);
    expect(stop).toBe(9);
    const { code, stdout } = await run(["generate", QWEN3_DIR, "--prompt", "Describe a sunny day.", "--max-tokens", "12", "--device", "cpu", "--json"]);
    expect(code).toBe(0);
    expect((JSON.parse(stdout) as { token_ids: number[] }).token_ids).toEqual(greedy.slice(0, stop + 1));
  });

  test("--chat-template-kwargs renders as transformers' apply_chat_template with those keyword arguments", async () => {
    const noThink = refs.cases.no_think!;
    expect(noThink.template_kwargs).toEqual({ enable_thinking: false });
    const args = ["generate", QWEN3_DIR, "--prompt", "Count to five.", "--max-tokens", "12", "--device", "cpu", "--json"];
    const off = await run([...args, "--chat-template-kwargs", '{"enable_thinking": false}']);
    expect(off.code).toBe(0);
    const greedy = noThink.greedy!;
    const ids = (JSON.parse(off.stdout) as { token_ids: number[] }).token_ids;
    expect(ids).toEqual(greedy.slice(0, ids.length));
    expect(ids.length).toBeGreaterThan(0);
    const bad = await run([...args, "--chat-template-kwargs", "enable_thinking=false"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--chat-template-kwargs: got "enable_thinking=false", expected a JSON object');
  });

  test("--image to a text family is a one-line error naming it", async () => {
    const r = await run(["generate", QWEN3_DIR, "--prompt", "What is this?", "--image", join(FIXTURE_DIR, "images/a.png"), "--device", "cpu"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: message 1 (user) holds an image, but qwen3 is a text-only model family\n");
  });
});

describe("vagen generate flag checks", () => {
  const dir = mkdtempSync(join(tmpdir(), "vagen-generate-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const base = ["generate", FIXTURE_DIR, "--prompt", "hi"];

  test("--max-tokens 0 is refused up front, like other numeric flags", async () => {
    const r = await run([...base, "--max-tokens", "0", "--device", "cpu"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: --max-tokens: got "0", expected an integer >= 1\n');
    const empty = await run([...base, "--temperature", "", "--device", "cpu"]);
    expect(empty.stderr).toContain('--temperature: got "", expected a number >= 0');
  });

  test("--max-tokens beyond the model's positions says how many fit", async () => {
    // The fixture's config.json: max_position_embeddings 4096.
    const r = await run([...base, "--max-tokens", "5000", "--device", "cpu"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--max-tokens: got 5000, but the prompt is (\d+) tokens and the model holds 4096 positions/);
    const promptTokens = Number(r.stderr.match(/the prompt is (\d+) tokens/)![1]);
    expect(r.stderr).toContain(`hint: at most ${4096 - promptTokens} new tokens fit after this prompt`);
  });

  test("--device cuda without CUDA gets the same hint as serve", async () => {
    const { torchInfo } = await import("../../src/torch/index.ts");
    if (torchInfo().cudaDevices > 0) return;
    const r = await run([...base, "--device", "cuda"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: device cuda was requested but libtorch sees no CUDA device");
    expect(r.stderr).toContain("hint: use --device cpu");
  });

  test("--dtype takes what serve takes (f32, bf16, f16)", async () => {
    const bad = await run([...base, "--dtype", "f8", "--device", "cpu"]);
    expect(bad.stderr).toContain('--dtype: got "f8", expected f32, bf16, f16');
    const bf16 = await run([...base, "--dtype", "bf16", "--device", "cpu", "--max-tokens", "2", "--json"]);
    expect(bf16.code).toBe(0);
    expect(JSON.parse(bf16.stdout).token_ids).toHaveLength(2);
    // f16 passes the flag check; a libtorch without CPU half matmul says so in one line.
    const f16 = await run([...base, "--dtype", "f16", "--device", "cpu", "--max-tokens", "1", "--json"]);
    expect(f16.stderr).not.toContain("--dtype: got");
    if (f16.code !== 0) expect(f16.stderr).toMatch(/^error: --dtype f16: this libtorch cannot multiply f16 matrices on cpu .*\nhint: use --dtype f32 or bf16 on the CPU/);
  });

  test("--image: a missing file and a non-PNG file are told apart, without decoder internals", async () => {
    const missing = await run([...base, "--image", join(dir, "nope.png"), "--device", "cpu"]);
    expect(missing.stderr).toBe(`error: --image ${join(dir, "nope.png")}: file not found\n`);
    const jpeg = join(dir, "photo.jpg");
    writeFileSync(jpeg, new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1]));
    const notPng = await run([...base, "--image", jpeg, "--device", "cpu"]);
    expect(notPng.code).toBe(1);
    expect(notPng.stderr).toBe(`error: --image ${jpeg}: not a PNG file (it looks like JPEG)\nhint: only PNG images are supported; convert it first\n`);
  });
});

