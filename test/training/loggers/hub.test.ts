/**
 * `huggingface_hub.hf_save_freq` against a local Hub stand-in (HF_ENDPOINT): on each
 * such checkpoint the exported model folder is uploaded through @huggingface/hub (repo
 * created under the token's user, files committed under <project>/<experiment>/global_step_<N>/,
 * weights as LFS objects whose bytes match); a Hub that fails once is retried; a Hub that
 * keeps failing never stops training (the run waits its time limit, warns, and keeps the
 * folder). The token appears in no event and no file. hf_save_freq must be a multiple
 * of trainer.save_freq.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VagenError } from "../../../src/core/errors.ts";
import { loadTrainConfig } from "../../../src/training/config.ts";
import type { TrainEvent } from "../../../src/training/events.ts";
import { runTraining } from "../../../src/training/trainer.ts";
import { allText, hubStandIn } from "./stand-ins.ts";

const CONFIG = join(import.meta.dir, "..", "digit.yaml");
const FIXTURE = join(import.meta.dir, "..", "..", "fixtures", "qwen2_5_vl_tiny");
const TOKEN = "hf_testTokenForTheStandIn0123456789abcdef";
const saved = { HF_TOKEN: process.env.HF_TOKEN, HF_ENDPOINT: process.env.HF_ENDPOINT };

afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function train(dir: string, extra: string[]): Promise<TrainEvent[]> {
  const events: TrainEvent[] = [];
  const config = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=2", "trainer.save_freq=2", "huggingface_hub.hf_save_freq=2", "trainer.project_name=vtest", "trainer.experiment_name=hub-run", ...extra]);
  await runTraining(config, { onEvent: (e) => events.push(e) });
  return events;
}

const codes = (events: TrainEvent[]) => events.flatMap((e) => (e.type === "warning" && e.code.startsWith("hub") ? [e.code] : []));

describe("Hugging Face Hub upload", () => {
  test(
    "the exported model folder arrives at the Hub under project/experiment/global_step_N",
    async () => {
      const hub = hubStandIn({ user: "alice" });
      try {
        process.env.HF_TOKEN = TOKEN;
        process.env.HF_ENDPOINT = hub.url;
        const dir = mkdtempSync(join(tmpdir(), "vagen-hub-"));
        const events = await train(dir, ["huggingface_hub.repo_id=vagen-digit", "huggingface_hub.private=true"]);

        // a bare repo name goes under the token's user; the repo is created private
        expect(hub.rec.requests.some((r) => r.path === "/api/whoami-v2")).toBe(true);
        expect(hub.rec.created[0]).toMatchObject({ name: "vagen-digit", organization: "alice", visibility: "private", type: "model" });
        for (const r of hub.rec.requests.filter((r) => r.path.startsWith("/api/"))) expect(r.auth).toBe(`Bearer ${TOKEN}`);
        expect(hub.rec.requests.some((r) => r.path === "/api/models/alice/vagen-digit/commit/main")).toBe(true);

        expect(hub.rec.commits.length).toBe(1);
        const files = hub.rec.commits[0]!.files;
        const prefix = "vtest/hub-run/global_step_2/";
        expect([...files.keys()].every((p) => p.startsWith(prefix))).toBe(true);
        // the base model's files, byte for byte
        expect(new TextDecoder().decode(files.get(`${prefix}config.json`)!.bytes)).toBe(readFileSync(join(FIXTURE, "config.json"), "utf8"));
        expect(files.get(`${prefix}tokenizer.json`)!.bytes!.length).toBe(readFileSync(join(FIXTURE, "tokenizer.json")).length);
        // the trained weights, as LFS objects whose bytes hash to their oid
        const weights = [...files].filter(([p]) => p.endsWith(".safetensors"));
        expect(weights.length).toBeGreaterThan(0);
        for (const [, f] of weights) {
          const bytes = hub.rec.lfs.get(f.oid!)!;
          expect(bytes.length).toBeGreaterThan(1000);
          expect(createHash("sha256").update(bytes).digest("hex")).toBe(f.oid!);
        }
        // the export folder is gone once the Hub has it; nothing went wrong
        expect(readdirSync(join(dir, "hf_upload"))).toEqual([]);
        // the upload of the last step is still going when training ends: the run says it waits
        expect(codes(events)).toEqual(["hub_waiting"]);
        const metrics = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
        expect(metrics[1]!["logger/hf_failed_uploads"]).toBe(0);

        expect(JSON.stringify(events)).not.toContain(TOKEN);
        expect(await allText(dir)).not.toContain(TOKEN);
      } finally {
        hub.stop();
      }
    },
    120_000,
  );

  test(
    "a Hub that fails once is retried in the background and gets the upload",
    async () => {
      const hub = hubStandIn({ failCommits: 1 });
      try {
        process.env.HF_TOKEN = TOKEN;
        process.env.HF_ENDPOINT = hub.url;
        const dir = mkdtempSync(join(tmpdir(), "vagen-hub-retry-"));
        const events = await train(dir, ["huggingface_hub.repo_id=org/model", "huggingface_hub.wait_at_end_s=30"]);
        expect(hub.rec.requests.some((r) => r.path === "/api/whoami-v2")).toBe(false);
        expect(hub.rec.commits.length).toBe(1);
        expect(codes(events).sort()).toEqual(["hub_recovered", "hub_unreachable", "hub_waiting"]);
      } finally {
        hub.stop();
      }
    },
    120_000,
  );

  test(
    "a Hub that keeps failing: training completes, the end waits its limit, warns and keeps the folder",
    async () => {
      const hub = hubStandIn({ failCommits: 1000 });
      try {
        process.env.HF_TOKEN = TOKEN;
        process.env.HF_ENDPOINT = hub.url;
        const dir = mkdtempSync(join(tmpdir(), "vagen-hub-down-"));
        const events = await train(dir, ["huggingface_hub.repo_id=org/model", "huggingface_hub.wait_at_end_s=1"]);
        expect(events.at(-1)).toMatchObject({ type: "run_finished", reason: "completed", step: 2 });
        expect(codes(events).sort()).toEqual(["hub_unfinished", "hub_unreachable", "hub_waiting"]);
        expect(existsSync(join(dir, "hf_upload", "global_step_2", "config.json"))).toBe(true);
        expect(JSON.stringify(events)).not.toContain(TOKEN);
      } finally {
        hub.stop();
      }
    },
    120_000,
  );

  test("hf_save_freq must be a multiple of trainer.save_freq, and HF_TOKEN must be set", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-hub-cfg-"));
    for (const [freq, save] of [[3, 2], [2, 0]]) {
      const err = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, `trainer.save_freq=${save}`, `huggingface_hub.hf_save_freq=${freq}`]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(VagenError);
      expect((err as Error).message).toContain('key "huggingface_hub.hf_save_freq"');
      expect((err as Error).message).toContain(`a multiple of trainer.save_freq (${save})`);
    }
    delete process.env.HF_TOKEN;
    const config = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.save_freq=2", "huggingface_hub.hf_save_freq=4"]);
    const err = await runTraining(config).catch((e: unknown) => e);
    expect((err as Error).message).toContain("HF_TOKEN is not set");
  });
});
