/**
 * `bun build.ts --release` writes the binary's checksum in sha256sum's format, so a
 * download is verified with `sha256sum -c vagen.sha256` next to the binary.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeChecksum } from "../../build.ts";

test("the checksum file names the binary and verifies with sha256sum -c, and fails for a changed binary", () => {
  const dir = mkdtempSync(join(tmpdir(), "vagen-release-"));
  try {
    const binary = join(dir, "vagen");
    writeFileSync(binary, "abc");
    const file = writeChecksum(binary);
    // sha256("abc"), the FIPS 180-2 test vector.
    expect(readFileSync(file, "utf8")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  vagen\n");
    if (Bun.which("sha256sum")) {
      expect(Bun.spawnSync(["sha256sum", "-c", "vagen.sha256"], { cwd: dir }).exitCode).toBe(0);
      writeFileSync(binary, "abd");
      expect(Bun.spawnSync(["sha256sum", "-c", "vagen.sha256"], { cwd: dir, stderr: "pipe", stdout: "pipe" }).exitCode).not.toBe(0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
