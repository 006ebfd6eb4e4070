/**
 * vagen export never destroys what it was not asked to replace: a non-empty folder or a
 * file only with --force, and the checkpoint, the run folder around it and the base model
 * never; the new directory appears whole or not at all.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VagenError } from "../../src/core/errors.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { exportCheckpoint } from "../../src/training/export.ts";

let root: string;
let run: string;
let step: string;
let base: string;
let weightsFile: string;

/** A run folder with one checkpoint of two tiny tensors, and a base model with a config. */
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "vagen-export-target-"));
  base = join(root, "base");
  mkdirSync(base);
  writeFileSync(join(base, "config.json"), '{"model_type": "test"}\n');
  writeFileSync(join(base, "tokenizer.json"), "{}\n");
  run = join(root, "run");
  step = join(run, "checkpoints", "step_1");
  mkdirSync(join(step, "actor"), { recursive: true });
  writeFileSync(join(run, "config.yaml"), `model:\n  model_dir: ${base}\n`);
  writeFileSync(join(run, "metrics.jsonl"), '{"step":1}\n');
  weightsFile = join(step, "actor", "model.safetensors");
  using w = torch.tensor([1, 2, 3, 4], [2, 2]);
  using head = torch.tensor([5], [1]);
  safetensors.save(weightsFile, { "lm_head.weight": w, "value_head.weight": head });
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** The message of the VagenError `fn` throws (fails the test if it throws none). */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(VagenError);
    return (err as VagenError).message;
  }
  throw new Error("expected the export to be refused");
}

/** Everything under `dir`, with file contents, to compare before and after. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out[path.slice(dir.length)] = readFileSync(path).toString("base64");
    }
  }
  return out;
}

/** Staging folders left beside a target (`.name.tmp-*`). */
function leftovers(dir: string): string[] {
  return readdirSync(dir).filter((f) => f.includes(".tmp-"));
}

function exportedNames(dir: string): string[] {
  const loaded = safetensors.load(join(dir, "model.safetensors"));
  const names = [...loaded.keys()].sort();
  for (const t of loaded.values()) t.dispose();
  return names;
}

describe("vagen export's target", () => {
  test("a new folder, and an empty existing one, receive the model directory", () => {
    const fresh = join(root, "models", "fresh");
    expect(exportCheckpoint(step, fresh).tensors).toBe(1);
    expect(exportedNames(fresh)).toEqual(["lm_head.weight"]);
    expect(readFileSync(join(fresh, "config.json"), "utf8")).toContain("test");
    const empty = join(root, "empty");
    mkdirSync(empty);
    exportCheckpoint(step, empty);
    expect(exportedNames(empty)).toEqual(["lm_head.weight"]);
    expect(leftovers(root)).toEqual([]);
    expect(leftovers(join(root, "models"))).toEqual([]);
  });

  test("a non-empty folder is refused and kept whole; --force replaces it", () => {
    const other = join(root, "other-work");
    mkdirSync(join(other, "deep"), { recursive: true });
    writeFileSync(join(other, "deep", "notes.txt"), "keep me");
    const message = refusal(() => exportCheckpoint(step, other));
    expect(message).toContain(`--out ${other}`);
    expect(message).toContain("not empty");
    expect(readFileSync(join(other, "deep", "notes.txt"), "utf8")).toBe("keep me");
    exportCheckpoint(step, other, { force: true });
    expect(existsSync(join(other, "deep"))).toBe(false);
    expect(exportedNames(other)).toEqual(["lm_head.weight"]);
    expect(readdirSync(root).filter((f) => f.startsWith("."))).toEqual([]);
  });

  test("a regular file is refused and kept; --force replaces it with the directory", () => {
    const file = join(root, "model.bin");
    writeFileSync(file, "not a model");
    const message = refusal(() => exportCheckpoint(step, file));
    expect(message).toContain(`--out ${file}: is a file`);
    expect(readFileSync(file, "utf8")).toBe("not a model");
    exportCheckpoint(step, file, { force: true });
    expect(exportedNames(file)).toEqual(["lm_head.weight"]);
  });

  test("the checkpoint, its actor, a folder inside it, the run folder and anything above are refused even with --force", () => {
    const before = snapshot(root);
    const cases: [string, string][] = [
      [step, "is the checkpoint"],
      [join(step, "actor"), "is the checkpoint's actor weights"],
      [join(step, "actor", "exported"), "is inside the checkpoint"],
      [join(step, "new-model"), "is inside the checkpoint"],
      [run, "contains the checkpoint"],
      [join(run, "checkpoints"), "contains the checkpoint"],
      [root, "contains the checkpoint"],
      [base, "is the base model"],
      [join(base, "exported"), "is inside the base model"],
    ];
    for (const [out, why] of cases) {
      for (const force of [false, true]) {
        const message = refusal(() => exportCheckpoint(step, out, { force }));
        expect(message, out).toContain(`--out ${out}: ${why}`);
      }
    }
    // Not one byte of the run, the checkpoint or the base model changed; nothing was left behind.
    expect(snapshot(root)).toEqual(before);
    expect(existsSync(join(step, "actor", "exported"))).toBe(false);
  });

  test("the checkpoint given as its actor folder, and a path reaching the run through a symlink, are refused too", () => {
    const link = join(root, "link-to-run");
    symlinkSync(run, link);
    const before = snapshot(run);
    expect(refusal(() => exportCheckpoint(join(step, "actor"), run, { force: true }))).toContain("contains the checkpoint");
    expect(refusal(() => exportCheckpoint(step, link, { force: true }))).toContain("contains the checkpoint");
    expect(refusal(() => exportCheckpoint(step, join(link, "checkpoints", "step_1"), { force: true }))).toContain("is the checkpoint");
    expect(snapshot(run)).toEqual(before);
  });

  test("an export that fails part-way leaves a forced target as it was and no staging folder", () => {
    const target = join(root, "previous-export");
    mkdirSync(target);
    writeFileSync(join(target, "model.safetensors"), "the previous export");
    // A base model whose tokenizer.json is a folder: copying it fails after the weights are written.
    rmSync(join(base, "tokenizer.json"));
    mkdirSync(join(base, "tokenizer.json"));
    expect(() => exportCheckpoint(step, target, { force: true })).toThrow();
    expect(readFileSync(join(target, "model.safetensors"), "utf8")).toBe("the previous export");
    expect(readdirSync(root).filter((f) => f.startsWith("."))).toEqual([]);
  });
});

describe("a checkpoint path that is not there", () => {
  test("a pruned step is one line naming it, with the steps the run keeps", async () => {
    const { actorWeightsDir } = await import("../../src/training/export.ts");
    const { mkdirSync, mkdtempSync, writeFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const root = join(mkdtempSync(join(tmpdir(), "vagen-pruned-")), "checkpoints");
    mkdirSync(join(root, "step_3", "actor"), { recursive: true });
    mkdirSync(join(root, "step_12", "actor"), { recursive: true });
    let message = "";
    try {
      actorWeightsDir(join(root, "step_1"));
    } catch (err) {
      message = `${(err as Error).message} | ${(err as { hint?: string }).hint}`;
    }
    expect(message).toContain("step_1: no such checkpoint");
    expect(message).toContain("the run keeps step_3, step_12");
    expect(message).not.toContain("ENOENT");
    writeFileSync(join(root, "file"), "x");
    expect(() => actorWeightsDir(join(root, "file"))).toThrow(/a file, expected a checkpoint folder/);
  });
});
