/**
 * `vagen demo --device cuda` on a machine without CUDA: one line naming the device, before
 * anything is built, and no run folder left behind.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "bun";
import * as torch from "../../src/torch/index.ts";

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

test.skipIf(torch.cuda.isAvailable())("a CUDA device that is not there is refused before the demo builds anything", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "vagen-demo-device-")), "run");
  const child = spawn(["bun", MAIN, "demo", "--device", "cuda", "--out", out, "--no-tui"], { stdout: "ignore", stderr: "pipe" });
  const stderr = await new Response(child.stderr).text();
  expect(await child.exited).not.toBe(0);
  expect(stderr).toContain("--device cuda: no CUDA device is available");
  expect(existsSync(out)).toBe(false);
});

test("without --format, Sokoban on CUDA runs wm (VAGEN's Sokoban default) and everything else answers", async () => {
  const { defaultFormat } = await import("../../src/cli/commands/demo.ts");
  expect(defaultFormat("sokoban", "cuda")).toBe("wm");
  expect(defaultFormat("sokoban", "cuda:1")).toBe("wm");
  expect(defaultFormat("sokoban", "cpu")).toBe("answer");
  expect(defaultFormat("frozenlake", "cuda")).toBe("answer");
  expect(defaultFormat("frozenlake", "cpu")).toBe("answer");
});

test.skipIf(torch.cuda.isAvailable())("--env sokoban --device cuda without --format is refused for the device, not the format", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "vagen-demo-device-")), "run");
  const child = spawn(["bun", MAIN, "demo", "--env", "sokoban", "--device", "cuda", "--out", out, "--no-tui"], { stdout: "ignore", stderr: "pipe" });
  const stderr = await new Response(child.stderr).text();
  expect(await child.exited).not.toBe(0);
  expect(stderr).toContain("--device cuda: no CUDA device is available");
  expect(existsSync(out)).toBe(false);
});
