import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TensorBoardWriter, crc32c, encodeEvent, maskedCrc32c, readEventFile } from "../../src/training/tensorboard.ts";

describe("TensorBoard event files", () => {
  test("crc32c matches the published check value", () => {
    // CRC-32C("123456789") = 0xE3069283 (RFC 3720 appendix / the Castagnoli check value)
    expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
    expect(maskedCrc32c(new Uint8Array(0))).toBe(0xa282ead8); // crc of nothing is 0; the mask adds the constant
  });

  test("an Event proto's bytes, field by field", () => {
    // wall_time 1.0: key 0x09 + 8 LE bytes of 1.0; step 3: key 0x10, varint 3
    expect(Array.from(encodeEvent({ wallTime: 1, step: 3 }))).toEqual([0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 3]);
  });

  test("scalars written are read back with their steps, CRCs checked", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-tb-"));
    const w = new TensorBoardWriter(dir, 1_700_000_000_000);
    w.scalars(1, { "actor/pg_loss": 0.25, "critic/score/mean": -1.5, "bad": Number.NaN }, 1_700_000_001_000);
    w.scalars(2, { "actor/pg_loss": 0.125 }, 1_700_000_002_000);
    const files = readdirSync(dir);
    expect(files.length).toBe(1);
    expect(files[0]!.startsWith("events.out.tfevents.1700000000.")).toBe(true);
    const events = readEventFile(w.path);
    expect(events[0]!.version).toBe("brain.Event:2");
    expect(events.slice(1).map((e) => [e.step, e.wallTime, e.scalars])).toEqual([
      [1, 1_700_000_001, { "actor/pg_loss": 0.25, "critic/score/mean": -1.5 }],
      [2, 1_700_000_002, { "actor/pg_loss": 0.125 }],
    ]);
  });
});
