/**
 * `trainer.logger: [console, wandb]` against a local W&B stand-in: the run's config and
 * one history row per step (with the trainer's step numbers) arrive, a resumed run
 * continues the same W&B run where its history stood, a server that answers 500 and
 * then recovers loses nothing, and a server that is down never stops training (it
 * warns, and the local run file holds every row). Offline mode writes W&B's run folder.
 * The API key appears in no event and no file.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VagenError } from "../../../src/core/errors.ts";
import { loadTrainConfig } from "../../../src/training/config.ts";
import type { TrainEvent } from "../../../src/training/events.ts";
import { readRecords } from "../../../src/training/loggers/wandb-records.ts";
import { runTraining } from "../../../src/training/trainer.ts";
import { allText, deadUrl, wandbStandIn } from "./stand-ins.ts";
import { decodeFields } from "./proto-reader.ts";

const CONFIG = join(import.meta.dir, "..", "digit.yaml");
const KEY = "wandb-test-key-0123456789abcdef0123456789";
const ENV_KEYS = ["WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY"] as const;
const saved = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));

afterEach(() => {
  for (const k of ENV_KEYS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

function setEnv(vars: Partial<Record<(typeof ENV_KEYS)[number], string>>): void {
  for (const k of ENV_KEYS) delete process.env[k];
  Object.assign(process.env, vars);
}

async function train(dir: string, extra: string[] = []): Promise<{ events: TrainEvent[]; text: string }> {
  const events: TrainEvent[] = [];
  const config = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=3", "trainer.logger=[console,wandb]", "trainer.project_name=vtest", "trainer.experiment_name=digit-run", "trainer.logger_flush_s=20", ...extra]);
  await runTraining(config, { onEvent: (e) => events.push(e) });
  return { events, text: JSON.stringify(events) };
}

const warnings = (events: TrainEvent[]) => events.filter((e): e is Extract<TrainEvent, { type: "warning" }> => e.type === "warning");

describe("W&B logging", () => {
  test(
    "config and every step's metrics arrive; a resumed run continues the same W&B run",
    async () => {
      const w = wandbStandIn({ entity: "team" });
      try {
        setEnv({ WANDB_API_KEY: KEY, WANDB_BASE_URL: w.url });
        const dir = mkdtempSync(join(tmpdir(), "vagen-wandb-"));
        const first = await train(dir, ["trainer.test_freq=3"]);

        expect(w.rec.upserts.length).toBe(1);
        const up = w.rec.upserts[0]!;
        expect(up.auth).toBe(`Basic ${Buffer.from(`api:${KEY}`).toString("base64")}`);
        expect(up.variables.project).toBe("vtest");
        expect(up.variables.displayName).toBe("digit-run");
        const config = JSON.parse(String(up.variables.config)) as Record<string, { value: Record<string, unknown> }>;
        expect(config.algorithm!.value.adv_estimator).toBe("grpo");
        expect(config.data!.value.train_batch_size).toBe(8);
        const runId = String(up.variables.name);
        expect(runId).toMatch(/^[a-z0-9]{8}$/);
        expect(w.rec.streams[0]!.path).toBe(`/files/team/vtest/${runId}/file_stream`);

        const rows = w.history();
        expect(rows.map((r) => r.row._step)).toEqual([1, 2, 3]);
        expect(rows.map((r) => r.offset)).toEqual([0, 1, 2]);
        const metrics = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
        expect(rows[0]!.row["actor/pg_loss"]).toBe(metrics[0]!["actor/pg_loss"]!);
        expect(rows[2]!.row["val/digit/success_rate"]).toBe(metrics[2]!["val/digit/success_rate"]!);
        expect(metrics[0]!["logger/wandb_dropped_rows"]).toBe(0);
        // the validation table, merged into step 3's row, and its file uploaded first
        const table = rows[2]!.row["val/episodes"] as { _type: string; path: string; nrows: number };
        expect(table._type).toBe("table-file");
        expect(table.nrows).toBe(16);
        const tableJson = JSON.parse(new TextDecoder().decode(w.rec.uploads.get(table.path)!)) as { columns: string[]; data: unknown[][] };
        expect(tableJson.columns.slice(0, 3)).toEqual(["step", "env", "seed"]);
        expect(tableJson.data[0]!.slice(0, 2)).toEqual([3, "digit"]);
        expect(tableJson.data.map((r) => r[2])).toEqual(expect.arrayContaining([1000, 1015]));
        const last = w.rec.streams.at(-1)!.body;
        expect(last).toEqual({ complete: true, exitcode: 0 });
        expect(warnings(first.events).filter((e) => e.code.startsWith("wandb"))).toEqual([]);

        const state = JSON.parse(readFileSync(join(dir, "wandb", "run.json"), "utf8")) as { id: string; historyOffset: number; lastStep: number };
        expect(state).toMatchObject({ id: runId, historyOffset: 3, lastStep: 3 });

        // resume from the step-3 checkpoint: the same run id, history continuing at line 3
        const second = await train(dir, ["trainer.total_steps=5", "trainer.test_freq=0"]);
        expect(w.rec.upserts.length).toBe(2);
        expect(w.rec.upserts[1]!.variables.name).toBe(runId);
        const all = w.history();
        expect(all.map((r) => r.row._step)).toEqual([1, 2, 3, 4, 5]);
        expect(all.map((r) => r.offset)).toEqual([0, 1, 2, 3, 4]);

        // the key is in no event and no file the run wrote
        for (const text of [first.text, second.text, await allText(dir)]) expect(text).not.toContain(KEY);
        // both segments' local run folders are W&B's layout
        const folders = readdirSync(join(dir, "wandb")).filter((n) => n.startsWith("run-"));
        expect(folders.length).toBe(2);
        for (const f of folders) expect(f).toMatch(new RegExp(`^run-\\d{8}_\\d{6}-${runId}$`));
      } finally {
        w.stop();
      }
    },
    120_000,
  );

  test(
    "a server that answers 500 and then recovers: nothing lost, warned once",
    async () => {
      const w = wandbStandIn({ failFirst: 2 });
      try {
        setEnv({ WANDB_API_KEY: KEY, WANDB_BASE_URL: w.url });
        const dir = mkdtempSync(join(tmpdir(), "vagen-wandb-500-"));
        const { events } = await train(dir, ["trainer.test_freq=0"]);
        expect(w.rec.rejected).toBe(2);
        expect(w.history().map((r) => r.row._step)).toEqual([1, 2, 3]);
        expect(w.history().map((r) => r.offset)).toEqual([0, 1, 2]);
        const codes = warnings(events).map((e) => e.code);
        expect(codes.filter((c) => c === "wandb_unreachable").length).toBe(1);
        expect(codes).not.toContain("wandb_incomplete");
        expect(w.rec.streams.at(-1)!.body).toEqual({ complete: true, exitcode: 0 });
      } finally {
        w.stop();
      }
    },
    120_000,
  );

  test(
    "a server that is down: training completes, warns, and the local run file holds every row",
    async () => {
      setEnv({ WANDB_API_KEY: KEY, WANDB_BASE_URL: deadUrl() });
      const dir = mkdtempSync(join(tmpdir(), "vagen-wandb-down-"));
      const { events, text } = await train(dir, ["trainer.test_freq=0", "trainer.logger_flush_s=1"]);
      expect(events.at(-1)).toMatchObject({ type: "run_finished", reason: "completed", step: 3 });
      const codes = warnings(events).map((e) => e.code);
      expect(codes.filter((c) => c === "wandb_unreachable").length).toBe(1);
      expect(codes).toContain("wandb_incomplete");
      const incomplete = warnings(events).find((e) => e.code === "wandb_incomplete")!;
      expect(incomplete.message).toContain("wandb sync");
      const metrics = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
      expect(metrics.map((m) => m["logger/wandb_pending_rows"])).toEqual([0, 1, 2]);
      const folder = readdirSync(join(dir, "wandb")).find((n) => n.startsWith("run-"))!;
      expect(historySteps(join(dir, "wandb", folder))).toEqual([1, 2, 3]);
      expect(text).not.toContain(KEY);
      expect(await allText(dir)).not.toContain(KEY);
    },
    120_000,
  );

  test(
    "WANDB_MODE=offline writes W&B's offline run folder and needs no key",
    async () => {
      setEnv({ WANDB_MODE: "offline", WANDB_PROJECT: "from-env" });
      const dir = mkdtempSync(join(tmpdir(), "vagen-wandb-offline-"));
      const config = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=2", "trainer.logger=[wandb]", "trainer.test_freq=0"]);
      await runTraining(config);
      const folders = readdirSync(join(dir, "wandb")).filter((n) => n.startsWith("offline-run-"));
      expect(folders.length).toBe(1);
      const run = join(dir, "wandb", folders[0]!);
      const id = folders[0]!.split("-").at(-1)!;
      expect(existsSync(join(run, `run-${id}.wandb`))).toBe(true);
      expect(readFileSync(join(run, "files", "config.yaml"), "utf8")).toContain("adv_estimator: grpo");
      expect(JSON.parse(readFileSync(join(run, "files", "wandb-summary.json"), "utf8"))._step).toBe(2);
      expect(historySteps(run)).toEqual([1, 2]);
      // the run record names the project from WANDB_PROJECT (trainer.project_name unset), the exit code 0
      const records = readRecords(readFileSync(join(run, `run-${id}.wandb`))).map(decodeFields);
      const runRecord = decodeFields(records.find((r) => r.has(17))!.get(17)![0] as Uint8Array);
      expect(new TextDecoder().decode(runRecord.get(1)![0] as Uint8Array)).toBe(id);
      expect(new TextDecoder().decode(runRecord.get(3)![0] as Uint8Array)).toBe("from-env");
      expect(records.some((r) => r.has(18))).toBe(true);
      expect(records.at(-1)!.has(20)).toBe(true);
      // TensorBoard follows trainer.logger: not listed, not written
      expect(existsSync(join(dir, "tensorboard"))).toBe(false);
    },
    120_000,
  );

  test("online without WANDB_API_KEY fails before any model loads, naming the key and the variable", async () => {
    setEnv({});
    const dir = mkdtempSync(join(tmpdir(), "vagen-wandb-nokey-"));
    const config = await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.logger=[console,wandb]"]);
    const err = await runTraining(config).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect((err as Error).message).toContain('key "trainer.logger" lists wandb');
    expect((err as Error).message).toContain("WANDB_API_KEY");
    expect(existsSync(join(dir, "metrics.jsonl"))).toBe(false);
  });
});

/** The steps of the history records in a run folder's .wandb file. */
function historySteps(runDir: string): number[] {
  const file = readdirSync(runDir).find((n) => n.endsWith(".wandb"))!;
  return readRecords(readFileSync(join(runDir, file)))
    .map(decodeFields)
    .filter((r) => r.has(2))
    .map((r) => {
      const history = decodeFields(r.get(2)![0] as Uint8Array);
      const step = decodeFields(history.get(2)![0] as Uint8Array);
      return Number(step.get(1)![0]);
    });
}
