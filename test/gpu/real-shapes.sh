#!/usr/bin/env bash
# InternVL3.5-1B and GLM-4.6V-Flash parity at their published shapes on one GPU: makes the
# two reference directories with python3 and transformers (internvl_tiny/make_fixture.py
# --config 1b, glm4v_tiny/make_fixture.py --config flash, each --device cuda; a directory
# already there is not remade), then runs test/gpu/internvl.test.ts and
# test/gpu/glm4v.test.ts on them (each: the tiny fixture on CUDA, then the real-shape
# checks). The GLM directory (9B parameters, about 19 GB of bf16 shards) is made in the
# background while the InternVL one is made and tested. Logs go to OUT
# (make_internvl_1b.log, make_glm4v_flash.log, bun-internvl.log, bun-glm4v.log, and
# summary.txt: the printed figures and the timings).
# Usage (repository root, bun and a CUDA libtorch set up): bash test/gpu/real-shapes.sh OUT
#   INTERNVL_1B_DIR     where the InternVL directory is made (default ${TMPDIR:-/tmp}/vagen-internvl-1b)
#   GLM4V_FLASH_DIR     where the GLM directory is made (default ${TMPDIR:-/tmp}/vagen-glm4v-flash)
#   INTERNVL_MAKE_ARGS  make_fixture.py's arguments after --config 1b (default --device cuda)
#   GLM4V_MAKE_ARGS     make_fixture.py's arguments after --config flash (default --device cuda)
#   PYTHON              the interpreter with torch and transformers (default python3)
# A dry run on the CPU (reduced stacks, the real-shape checks on the CPU):
#   INTERNVL_MAKE_ARGS="--device cpu --text-layers 2 --vision-depth 2" \
#   GLM4V_MAKE_ARGS="--device cpu --text-layers 2 --vision-depth 2" \
#   VAGEN_INTERNVL_1B_DEVICE=cpu VAGEN_GLM4V_FLASH_DEVICE=cpu \
#   INTERNVL_1B_DIR=SOMEWHERE GLM4V_FLASH_DIR=SOMEWHERE_ELSE bash test/gpu/real-shapes.sh OUT
set -uo pipefail
OUT=${1:?usage: bash test/gpu/real-shapes.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/../.."
IVL_DIR=${INTERNVL_1B_DIR:-${TMPDIR:-/tmp}/vagen-internvl-1b}
GLM_DIR=${GLM4V_FLASH_DIR:-${TMPDIR:-/tmp}/vagen-glm4v-flash}
IVL_ARGS=${INTERNVL_MAKE_ARGS:---device cuda}
GLM_ARGS=${GLM4V_MAKE_ARGS:---device cuda}
PYTHON=${PYTHON:-python3}
start=$SECONDS

# make SCRIPT CONFIG ARGS DIR LOG: the reference directory, made beside and then moved (an
# interrupted run leaves no directory that looks complete); skipped when it is there.
make_dir() {
  local script=$1 config=$2 args=$3 dir=$4 log=$5 t0=$SECONDS
  if [ -f "$dir/refs.json" ]; then
    echo "reference directory $dir is present: not remade" > "$log"
  else
    rm -rf "$dir.partial"
    # shellcheck disable=SC2086
    if ! "$PYTHON" "$script" --config "$config" $args --out "$dir.partial" > "$log" 2>&1; then
      echo "make_fixture.py --config $config failed (see $log)" >> "$log"
      return 1
    fi
    rm -rf "$dir" && mv "$dir.partial" "$dir"
  fi
  echo "size: $(du -sh "$dir" | cut -f1)" >> "$log"
  echo "made in $((SECONDS - t0)) s" >> "$log"
}

make_dir test/fixtures/glm4v_tiny/make_fixture.py flash "$GLM_ARGS" "$GLM_DIR" "$OUT/make_glm4v_flash.log" &
glm_make=$!

ivl_rc=1
if make_dir test/fixtures/internvl_tiny/make_fixture.py 1b "$IVL_ARGS" "$IVL_DIR" "$OUT/make_internvl_1b.log"; then
  t0=$SECONDS
  VAGEN_INTERNVL_1B_DIR="$IVL_DIR" bun test --timeout 600000 test/gpu/internvl.test.ts > "$OUT/bun-internvl.log" 2>&1
  ivl_rc=$?
  echo "bun test internvl: $((SECONDS - t0)) s (rc $ivl_rc)" >> "$OUT/bun-internvl.log"
else
  echo "make_fixture.py --config 1b failed" > "$OUT/bun-internvl.log"
fi

glm_rc=1
if wait "$glm_make"; then
  t0=$SECONDS
  VAGEN_GLM4V_FLASH_DIR="$GLM_DIR" bun test --timeout 600000 test/gpu/glm4v.test.ts > "$OUT/bun-glm4v.log" 2>&1
  glm_rc=$?
  echo "bun test glm4v: $((SECONDS - t0)) s (rc $glm_rc)" >> "$OUT/bun-glm4v.log"
else
  echo "make_fixture.py --config flash failed" > "$OUT/bun-glm4v.log"
fi

{
  for f in make_internvl_1b make_glm4v_flash bun-internvl bun-glm4v; do
    echo "== $f"
    grep -hE "^internvl|^glm4v|^\[make_fixture\]|^made in|^bun test|^size:|failed|\(fail\)|^ *[0-9]+ (pass|fail|skip)" "$OUT/$f.log"
  done
  echo "total: $((SECONDS - start)) s (internvl rc $ivl_rc, glm4v rc $glm_rc)"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
[ "$ivl_rc" -eq 0 ] && [ "$glm_rc" -eq 0 ]
