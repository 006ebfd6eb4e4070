#!/usr/bin/env bash
# PPO with a full critic at Qwen2.5-VL-3B's shape (make_3b_shaped.py with Qwen's 151,936-row
# vocabulary, bf16), which runs out of one H200's memory with AdamW's state on the GPU, with
# the state offloaded to host memory (actor/critic.optimizer_offload):
#   offload        one process, the whole state in host memory
#   zero2-offload  two ranks sharing the GPU over Gloo, ZeRO-2 (each rank keeps half the
#                  state, in host memory, and half the reduced gradients)
# STEPS steps each; GPU memory (nvidia-smi, every 0.5 s: all processes, the allocators'
# caches included) and host memory in use (MemTotal - MemAvailable, every 0.5 s) sampled,
# and each step's peak CUDA allocation and reservation and resident host memory of the
# largest rank from metrics.jsonl; a summary line per variant in OUT/summary.txt.
# Usage (repository root, bun and libtorch set up): bash test/training/h200/offload-3b.sh OUT_DIR [VARIANT...]
set -uo pipefail
OUT=${1:?out dir}
shift
VARIANTS=${*:-offload zero2-offload}
H=test/training/h200
STEPS=${STEPS:-2}
mkdir -p "$OUT"
source $H/model-3b-vocab.sh
OFFLOAD="algorithm.adv_estimator=default_gae actor.optimizer_offload=true critic.optimizer_offload=true"
for variant in $VARIANTS; do
  case $variant in
    offload) args="$OFFLOAD" ;;
    zero2-offload) args="$OFFLOAD trainer.n_gpus_per_node=2 trainer.zero_stage=2" ;;
    *) echo "unknown variant $variant"; exit 2 ;;
  esac
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/gpu-$variant.txt" 2>/dev/null &
  SMI=$!
  ( while :; do awk '/MemTotal/{t=$2}/MemAvailable/{a=$2}END{print int((t-a)/1024)}' /proc/meminfo; sleep 0.5; done ) > "$OUT/host-$variant.txt" &
  HOST=$!
  start=$(date +%s)
  timeout ${STEP_BUDGET_S:-240} bun src/cli/main.ts train $H/sokoban-3b.yaml model.model_dir=$MODEL $args trainer.total_steps=$STEPS trainer.output_dir=/tmp/run-offload-$variant --no-tui > "$OUT/train-$variant.log" 2>&1
  rc=$?
  kill $SMI $HOST
  cp /tmp/run-offload-$variant/metrics.jsonl "$OUT/metrics-$variant.jsonl" 2>/dev/null
  steps=$(python3 -c "
import json,os
p='$OUT/metrics-$variant.jsonl'
rows=[json.loads(l) for l in open(p)] if os.path.exists(p) else []
k=lambda r,n: r.get('timing_s/'+n,0)
t=[k(r,'step') for r in rows]
a=[k(r,'update_actor') for r in rows]
c=[k(r,'update_critic') for r in rows]
m=lambda n: ','.join('%.1f'%r.get('perf/'+n,0) for r in rows)
print('steps=%d step_s=%s actor_update_s=%s critic_update_s=%s rank_peak_allocated_gib=%s rank_peak_reserved_gib=%s rank_rss_gib=%s' % (len(rows), ','.join('%.1f'%x for x in t), ','.join('%.1f'%x for x in a), ','.join('%.1f'%x for x in c), m('max_memory_allocated_gb'), m('max_memory_reserved_gb'), m('cpu_memory_rss_gb')))")
  echo "$variant rc=$rc wall_s=$(( $(date +%s) - start )) gpu_peak_mib=$(sort -n "$OUT/gpu-$variant.txt" | tail -1) host_peak_mib=$(sort -n "$OUT/host-$variant.txt" | tail -1) $steps" | tee -a "$OUT/summary.txt"
done
