/**
 * A stand-in C++ compiler for shim tests, so the build logic (stamps, parallel jobs,
 * atomic linking, the cache) runs in milliseconds instead of minutes. `-c SRC -o OBJ`
 * writes a small object (and fails, like a compiler, on a source with "#error"); a
 * `-shared -o OUT` link copies $VAGEN_FAKE_SHIM (a real shim, so what it "links" can be
 * loaded) or writes a placeholder. Every call is appended to $VAGEN_FAKE_CALLS.
 */
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SCRIPT = `#!/bin/sh
out=""; src=""; shared=0; prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  [ "$prev" = "-c" ] && src="$a"
  [ "$a" = "-shared" ] && shared=1
  prev="$a"
done
[ -n "$VAGEN_FAKE_CALLS" ] && echo "$shared $src" >>"$VAGEN_FAKE_CALLS"
if [ $shared = 1 ]; then
  if [ -n "$VAGEN_FAKE_SHIM" ]; then cp "$VAGEN_FAKE_SHIM" "$out"; else echo library >"$out"; fi
  exit 0
fi
if grep -q '#error' "$src"; then echo "$src:1:2: error: #error boom" >&2; exit 1; fi
echo "object of $src" >"$out"
`;

/** Writes the fake compiler into a new temporary folder and returns its path. */
export function fakeCompiler(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-fakecxx-"));
  const path = join(dir, "fake-g++");
  writeFileSync(path, SCRIPT);
  chmodSync(path, 0o755);
  return path;
}
