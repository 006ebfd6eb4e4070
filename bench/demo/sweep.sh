#!/usr/bin/env bash
# Runs demo variants side by side (bench/demo/lift.ts), one process each, and collects
# their summaries. SPEC_FILE has one run a line:
#   NAME SEED FORMAT ALGORITHM DEVICE RECIPE_OF RECIPE_JSON
# (RECIPE_OF: cpu or cuda, the recipe the JSON overrides start from; DEVICE: where the
# policy runs). Every run gets LIMIT_S seconds (default 540), one libtorch thread, and
# writes OUT/NAME/ (the run directory), OUT/NAME.log and OUT/NAME.json; OUT/summary.txt
# has one line a run: warm start, every validation, final, lift, seconds.
# Usage (repository root): OUT=out LIMIT_S=540 bash bench/demo/sweep.sh SPEC_FILE
set -uo pipefail
SPEC=${1:?spec file}
OUT=${OUT:-out}
LIMIT_S=${LIMIT_S:-540}
mkdir -p "$OUT"
pids=()
while read -r name seed format algorithm device recipe_of recipe; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  OMP_NUM_THREADS=1 timeout "$LIMIT_S" bun bench/demo/lift.ts "$seed" "$recipe" "$OUT/$name" --env sokoban --format "$format" \
    --algorithm "$algorithm" --device "$device" --recipe-of "$recipe_of" > "$OUT/$name.json" 2> "$OUT/$name.log" &
  pids+=($!)
done < "$SPEC"
for pid in "${pids[@]}"; do wait "$pid"; done
while read -r name _; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  # finished: the summary; stopped at the limit: the validations the log reached
  python3 - "$OUT/$name" <<'PY' >> "$OUT/summary.txt"
import json, os, re, sys
base = sys.argv[1]
name = os.path.basename(base)
try:
    s = json.loads(open(base + ".json").read().strip().splitlines()[-1])
    vals = " ".join(f"{v['step']}:{v['success']:.2f}" for v in s["validations"])
    print(f"{name} sft {s['sft_success_rate']:.2f} vals {vals} final {s['final_success_rate']:.2f} lift {s['lift']:+.2f} s {s['seconds']:.0f}")
except Exception:
    log = open(base + ".log").read() if os.path.exists(base + ".log") else ""
    vals = " ".join(f"{a}:{float(b):.2f}" for a, b in re.findall(r"validation at step (\d+): ([0-9.]+)", log))
    last = [l for l in log.splitlines() if "rl step" in l or "sft step" in l][-1:] or ["(no steps)"]
    print(f"{name} unfinished vals {vals} last: {last[0]}")
PY
done < "$SPEC"
cat "$OUT/summary.txt"
