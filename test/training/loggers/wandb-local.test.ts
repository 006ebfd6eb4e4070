/** The local W&B run folder: one per segment, in W&B's layout, even for segments that start within one second. */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { LocalRun, folderStamp } from "../../../src/training/loggers/wandb-local.ts";

describe("W&B local run folders", () => {
  test("a segment that starts within the same second as the last takes the next second's stamp", () => {
    const root = mkdtempSync(join(tmpdir(), "vagen-wandb-local-"));
    const start = Date.UTC(2026, 11, 2, 8, 30, 59, 400);
    expect(folderStamp(start)).toBe("20261202_083059");
    const opts = { root, mode: "online" as const, id: "abcd1234", project: "p", displayName: "d", config: {}, startTimeMs: start };
    const first = new LocalRun({ ...opts, resumed: false });
    const second = new LocalRun({ ...opts, resumed: true });
    expect(basename(first.dir)).toBe("run-20261202_083059-abcd1234");
    expect(basename(second.dir)).toBe("run-20261202_083100-abcd1234");
    expect(readdirSync(root).sort()).toEqual(["run-20261202_083059-abcd1234", "run-20261202_083100-abcd1234"]);
    expect(existsSync(join(second.dir, "files", "config.yaml"))).toBe(true);
  });
});
