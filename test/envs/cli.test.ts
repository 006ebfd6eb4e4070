import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { decodePng } from "../../src/core/png.ts";
import { RemoteEnv, remoteEnvConfigSchema } from "../../envs/remote/client.ts";
import { parseKeyValues } from "../../src/config/index.ts";
import { halfBlockLines } from "../../envs/cli/terminal-image.ts";

const dir = mkdtempSync(join(tmpdir(), "vagen-env-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function vagen(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(["bun", "src/cli/main.ts", "env", ...args], { stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

describe("key=value parsing", () => {
  test("numbers, booleans, null, JSON lists, strings, dotted keys", () => {
    expect(parseKeyValues(["dim_room=[7,7]", "num_boxes=2", "use_example_in_sys_prompt=false", "min_solution_steps=null", "render_mode=vision", "a.b=1.5"])).toEqual({
      dim_room: [7, 7],
      num_boxes: 2,
      use_example_in_sys_prompt: false,
      min_solution_steps: null,
      render_mode: "vision",
      a: { b: 1.5 },
    });
    expect(parseKeyValues(['a="42"', "b=1e-3", 'desc=["SF","FG"]'])).toEqual({ a: "42", b: 0.001, desc: ["SF", "FG"] });
    expect(() => parseKeyValues(["novalue"])).toThrow(/key\.path=value/);
    expect(() => parseKeyValues(["a=[1,"])).toThrow(/YAML value/);
  });

  test("half-block rendering: one line per two pixel rows, 24-bit colours, scaled to fit", () => {
    const img = { width: 4, height: 3, data: new Uint8Array(36).fill(200) };
    const lines = halfBlockLines(img, 80);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain("\x1b[38;2;200;200;200m\x1b[48;2;200;200;200m▀");
    expect(halfBlockLines({ width: 100, height: 100, data: new Uint8Array(30000) }, 20)[0]!.split("▀")).toHaveLength(21);
  });
});

describe("vagen env (subprocess)", () => {
  test("list shows names, descriptions and config defaults", async () => {
    const text = await vagen(["list"]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("Sokoban\n");
    expect(text.stdout).toContain("    dim_room = [6,6]");
    const json = JSON.parse((await vagen(["list", "--json"])).stdout) as { name: string; config: Record<string, unknown> }[];
    expect(json.map((e) => e.name)).toEqual(["Sokoban", "FrozenLake", "RemoteEnv"]);
    expect(json[1]!.config.max_actions_per_step).toBe(5);
  });

  test("render writes the observation PNG", async () => {
    const out = join(dir, "room.png");
    const r = await vagen(["render", "Sokoban", "--seed", "3", "--out", out, "dim_room=[7,8]"]);
    expect(r.code).toBe(0);
    const img = decodePng(readFileSync(out));
    expect([img.width, img.height]).toEqual([128, 112]);
  });

  test("replay prints JSONL and saves images", async () => {
    const responses = ['"<think>a</think><answer>Down</answer>"', "", '"garbage"', '"<think>b</think><answer>Right, Up</answer>"'].join("\n");
    const images = join(dir, "frames");
    const r = await vagen(["replay", "FrozenLake", "--seed", "2", "--responses", "-", "--images", images, "render_mode=vision"], responses);
    expect(r.stderr).toBe("");
    const events = r.stdout.trim().split("\n").map((line) => JSON.parse(line));
    expect(events.map((e) => e.type)).toEqual(["reset", "step", "step", "step"]);
    expect(events[0].obs.images).toBe(1);
    expect(events[1].response).toBe("<think>a</think><answer>Down</answer>");
    expect(events[2].reward).toBe(0);
    expect(events[2].info.format_correct).toBe(false);
    for (const e of events) for (const path of e.obs.image_paths) expect(existsSync(path)).toBe(true);
  });

  test("replay: text mode from a file, deterministic", async () => {
    const file = join(dir, "responses.jsonl");
    await Bun.write(file, '"<observation>o</observation><think>t</think><answer>Left</answer><prediction>p</prediction>"\n');
    const a = await vagen(["replay", "Sokoban", "--seed", "9", "--responses", file]);
    const b = await vagen(["replay", "Sokoban", "--seed", "9", "--responses", file]);
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    const [reset, step] = a.stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(reset.obs.text).toContain(" # ");
    expect(step.info.actions).toEqual(["left"]);
  });

  test("errors are one line with a hint", async () => {
    const r = await vagen(["replay", "Sokobn", "--responses", "-"], "");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error: unknown env "Sokobn" (did you mean "Sokoban"?)');
    const bad = await vagen(["render", "Sokoban", "--out", join(dir, "x.png"), "num_boxes=zero"]);
    expect(bad.stderr).toContain('key "num_boxes": expected number, got "zero"');
  });

  test("play reads responses from stdin, wraps bare actions, shows parse results", async () => {
    const r = await vagen(["play", "FrozenLake", "--seed", "0", "--no-color", "render_mode=vision"], "right\n:s\n<oops> up\n:q\n");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("[image 256x256]");
    expect(r.stdout).toContain("parsed: format_correct=true");
    expect(r.stdout).toContain("parsed: format_correct=false");
    expect(r.stdout).toContain("You are a FrozenLake solver.");
  });

  test("serve: a client plays over HTTP, then the server stops on SIGTERM", async () => {
    const proc = Bun.spawn(["bun", "src/cli/main.ts", "env", "serve", "FrozenLake", "size=5", "--port", "0", "--token", "t0k"], { stdout: "pipe", stderr: "pipe" });
    const reader = proc.stdout.getReader();
    let banner = "";
    while (!banner.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      banner += new TextDecoder().decode(value);
    }
    const url = /at (http:\/\/\S+)/.exec(banner)![1]!;
    const env = new RemoteEnv(v.parse(remoteEnvConfigSchema, { base_urls: url, token: "t0k", retries: 0, log_retries: false }));
    const { obs } = await env.reset(4);
    expect(obs.text.split("\n").filter((l) => l.startsWith(" "))).toHaveLength(5); // size=5 from the serve defaults
    const step = await env.step("<think>x</think><answer>Up</answer>");
    expect(step.obs.text).toContain("the extracted valid action is ['up']");
    await env.close();
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  });

  test("serve: no token on a public address is refused; VAGEN_ENV_TOKEN sets one", async () => {
    const refused = await vagen(["serve", "Sokoban", "--host", "0.0.0.0", "--port", "0"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("error: refusing to serve on 0.0.0.0 without a token");
    expect(refused.stderr).toContain("--insecure");
    const proc = Bun.spawn(["bun", "src/cli/main.ts", "env", "serve", "Sokoban", "--port", "0"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, VAGEN_ENV_TOKEN: "env-t0k" },
    });
    const reader = proc.stdout.getReader();
    let banner = "";
    while (!banner.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      banner += new TextDecoder().decode(value);
    }
    const url = /at (http:\/\/\S+)/.exec(banner)![1]!;
    expect((await fetch(`${url}/sessions`)).status).toBe(401);
    expect((await fetch(`${url}/sessions?token=env-t0k`)).status).toBe(200);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  });

  test("render: SIGINT and SIGTERM end a long level generation at once", async () => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      // 32x32 with 30 boxes searches for seconds before failing.
      const proc = Bun.spawn(["bun", "src/cli/main.ts", "env", "render", "Sokoban", "--seed", "1", "--out", join(dir, "never.png"), "dim_room=[32,32]", "num_boxes=30"], {
        stdout: "pipe",
        stderr: "pipe",
      });
      await Bun.sleep(400); // past start-up, inside the search
      proc.kill(signal);
      const outcome = await Promise.race([proc.exited.then(() => "exited"), Bun.sleep(3000).then(() => "still running")]);
      proc.kill("SIGKILL");
      expect(outcome).toBe("exited");
      expect(existsSync(join(dir, "never.png"))).toBe(false);
    }
  });
});

