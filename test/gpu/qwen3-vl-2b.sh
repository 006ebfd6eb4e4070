#!/usr/bin/env bash
# Qwen3-VL parity at the Qwen3-VL-2B-Instruct shapes on one GPU: makes the reference
# directory with python3 and transformers (make_fixture.py --config 2b --device cuda;
# skipped when it is already there), then runs test/gpu/qwen3_vl.test.ts on it (the tiny
# fixture on CUDA, then the 2B checks). Logs go to OUT (make_fixture.log, bun-test.log,
# summary.txt: the printed figures and the timings).
# Usage (repository root, bun and a CUDA libtorch set up): bash test/gpu/qwen3-vl-2b.sh OUT
#   QWEN3_VL_2B_DIR   where the directory is made (default ${TMPDIR:-/tmp}/vagen-qwen3-vl-2b)
#   MAKE_ARGS         make_fixture.py's arguments after --config 2b (default --device cuda)
#   PYTHON            the interpreter with torch and transformers (default python3)
# A dry run on the CPU: MAKE_ARGS="--device cpu --text-layers 3 --vision-depth 3"
# VAGEN_QWEN3_VL_2B_DEVICE=cpu QWEN3_VL_2B_DIR=SOMEWHERE_ELSE bash test/gpu/qwen3-vl-2b.sh OUT
set -uo pipefail
OUT=${1:?usage: bash test/gpu/qwen3-vl-2b.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.."
DIR=${QWEN3_VL_2B_DIR:-${TMPDIR:-/tmp}/vagen-qwen3-vl-2b}
MAKE_ARGS=${MAKE_ARGS:---device cuda}
PYTHON=${PYTHON:-python3}
start=$SECONDS
if [ -f "$DIR/refs.json" ]; then
  echo "reference directory $DIR is present: not remade" | tee "$OUT/make_fixture.log"
else
  # Made beside, then moved: an interrupted run leaves no directory that looks complete.
  rm -rf "$DIR.partial"
  # shellcheck disable=SC2086
  if ! "$PYTHON" test/fixtures/qwen3_vl_tiny/make_fixture.py --config 2b $MAKE_ARGS --out "$DIR.partial" 2>&1 | tee "$OUT/make_fixture.log"; then
    echo "make_fixture.py failed" | tee -a "$OUT/summary.txt"
    exit 1
  fi
  rm -rf "$DIR" && mv "$DIR.partial" "$DIR"
fi
made=$SECONDS
du -sh "$DIR" | tee -a "$OUT/make_fixture.log"
VAGEN_QWEN3_VL_2B_DIR="$DIR" bun test --timeout 600000 test/gpu/qwen3_vl.test.ts 2>&1 | tee "$OUT/bun-test.log"
rc=${PIPESTATUS[0]}
{
  grep -h "^qwen3_vl\|^\[make_fixture\]" "$OUT/make_fixture.log" "$OUT/bun-test.log"
  grep -E "^ *[0-9]+ (pass|fail|skip)" "$OUT/bun-test.log"
  echo "reference directory: $((made - start)) s; bun test: $((SECONDS - made)) s (rc $rc)"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit "$rc"
