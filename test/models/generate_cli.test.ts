import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
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

  test("bad flags and directories are one-line errors", async () => {
    const bad = await run(["generate", FIXTURE_DIR, "--prompt", "x", "--top-p", "1.5", "--device", "cpu"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("--top-p");
    const missing = await run(["generate", "/nonexistent/model", "--prompt", "x", "--device", "cpu"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("config.json: file not found");
  });
});
