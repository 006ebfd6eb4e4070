#!/usr/bin/env bash
# The Sokoban demo's CUDA recipe on one GPU: three formats x three seeds as concurrent
# `vagen demo` processes, each with its own run directory under $OUT, then every run's
# metrics.jsonl and summary collected in one table.
#
#   answer      <answer>Right</answer>, GiGPO
#   free_think  a <think> with the solver's plan first, GiGPO
#   wm          VAGEN's world-model format (<perception>, <reasoning>, <prediction>,
#               <answer>) with the state-estimation and transition rewards (Sokoban's
#               exact reader), GiGPO as the recipe measured it (WM_ALGORITHM=bi_level:
#               PPO with a critic and bi-level GAE, VAGEN-Full's estimator)
#
# Needs a built dist/vagen (bun build.ts). Usage: OUT=out bash bench/demo/sokoban-gpu.sh
# Optional: SEEDS="0 1 2", FORMATS="answer free_think wm", WM_ALGORITHM=gigpo, LIMIT_S=1500
# (per run). The runs share the GPU's time: on an H200 a wm run alone took 313 s (2.7 s a
# step), two at once 1.8 s a free_think step and 3.0 s a wm step, and all nine at once
# 4.7-5.7 s an answer step, 6.3 s a free_think step and 10.5 s a wm step, 803-1184 s a run
# (docs/demo.md); choose SEEDS, FORMATS and LIMIT_S to fit the time you have (a run
# stopped by LIMIT_S keeps the validations it reached).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
SEEDS=${SEEDS:-"0 1 2"}
FORMATS=${FORMATS:-"answer free_think wm"}
LIMIT_S=${LIMIT_S:-1500}
VAGEN=${VAGEN:-dist/vagen}
mkdir -p "$OUT"
[ -x "$VAGEN" ] || { echo "no $VAGEN: build it first (bun build.ts)" >&2; exit 1; }
{ nvidia-smi -L; nproc; "$VAGEN" --version; } > "$OUT/env.txt" 2>&1

WM_ALGORITHM=${WM_ALGORITHM:-gigpo}
algorithm_for() { [ "$1" = wm ] && echo "$WM_ALGORITHM" || echo gigpo; }

pids=()
for format in $FORMATS; do
  for seed in $SEEDS; do
    run="$OUT/sokoban-$format-s$seed"
    # Each process is small: a few CPU threads for its envs and libtorch's host side.
    OMP_NUM_THREADS=1 timeout "$LIMIT_S" "$VAGEN" demo --env sokoban --format "$format" --algorithm "$(algorithm_for "$format")" \
      --device cuda --seed "$seed" --out "$run" --json --no-tui > "$run.json" 2> "$run.log" &
    pids+=($!)
  done
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

# One line per run: the summary's success rates (or the log's last line when it did not
# finish), and the held-out success at every validation from metrics.jsonl.
{
  echo "run sft_success final_success seconds validations"
  for format in $FORMATS; do
    for seed in $SEEDS; do
      run="$OUT/sokoban-$format-s$seed"
      vals=$(grep -h '"val/sokoban/success_rate"' "$run/metrics.jsonl" 2>/dev/null |
        sed -E 's/.*"step":([0-9]+).*"val\/sokoban\/success_rate":([0-9.]+).*/\1:\2/; s/.*"val\/sokoban\/success_rate":([0-9.]+).*"step":([0-9]+).*/\2:\1/' | tr '\n' ' ')
      summary=$(tail -1 "$run.json" 2>/dev/null)
      if [ -n "$summary" ]; then
        echo "$format-s$seed $(echo "$summary" | sed -E 's/.*"sft_success_rate":([0-9.]+).*"final_success_rate":([0-9.]+).*"seconds":([0-9.]+).*/\1 \2 \3/') $vals"
      else
        echo "$format-s$seed unfinished: $(tail -1 "$run.log" 2>/dev/null) $vals"
      fi
    done
  done
} | tee "$OUT/summary.txt"
# Every run's metrics, side by side, for the record.
mkdir -p "$OUT/metrics"
for run in "$OUT"/sokoban-*/; do
  name=$(basename "$run")
  [ -f "$run/metrics.jsonl" ] && cp "$run/metrics.jsonl" "$OUT/metrics/$name.jsonl"
done
exit $status
