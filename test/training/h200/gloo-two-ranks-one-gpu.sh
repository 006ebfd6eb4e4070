#!/usr/bin/env bash
# Two ranks on one GPU: NCCL refuses a GPU shared by two ranks ("Duplicate GPU
# detected"), so `trainer.n_gpus_per_node=2` on a one-GPU machine runs both ranks on cuda:0
# over Gloo (trainer.dist_backend auto), which sums the CUDA gradients through host
# memory. Three steps of the tiny fixture on DigitEnv, f32 on CUDA, the same global batch:
# plain, two Gloo ranks (buckets of 0.1 MiB), two ranks with ZeRO-2; every metric compared
# with the plain run's; then NCCL asked for explicitly must be refused, and a rank killed
# mid-run must end the other with a non-zero status.
# Usage (repository root, bun and libtorch set up, one GPU): bash test/training/h200/gloo-two-ranks-one-gpu.sh OUT_DIR
set -uo pipefail
OUT=${1:?out dir}
mkdir -p "$OUT"
common="test/training/digit.yaml model.device=cuda model.dtype=f32 trainer.total_steps=3 trainer.save_freq=0 algorithm.rollout_correction.rollout_is=null trainer.dist_timeout_s=60 --no-tui --quiet-phases"
bun src/cli/main.ts train $common trainer.output_dir=/tmp/gloo-plain > "$OUT/plain.log" 2>&1; echo "plain rc=$?"
for variant in ranks zero2; do
  extra="trainer.n_gpus_per_node=2 trainer.ddp_bucket_mb=0.1"
  [ $variant = zero2 ] && extra="$extra trainer.zero_stage=2"
  bun src/cli/main.ts train $common $extra trainer.output_dir=/tmp/gloo-$variant > "$OUT/$variant.log" 2>&1; echo "$variant rc=$?"
  python3 test/training/h200/compare_metrics.py /tmp/gloo-plain /tmp/gloo-$variant "$variant"
done
bun src/cli/main.ts train $common trainer.n_gpus_per_node=2 trainer.dist_backend=nccl trainer.output_dir=/tmp/gloo-nccl > "$OUT/nccl-refused.log" 2>&1
echo "nccl asked for on one GPU: rc=$? $(grep -o 'NCCL refuses[^;]*' "$OUT/nccl-refused.log" | head -1)"
# A rank killed mid-run: the launcher stops the other and exits non-zero.
bun src/cli/main.ts train $common trainer.total_steps=50 trainer.n_gpus_per_node=2 trainer.output_dir=/tmp/gloo-kill > "$OUT/kill.log" 2>&1 &
launcher=$!
for _ in $(seq 1 120); do [ -s /tmp/gloo-kill/metrics.jsonl ] && break; sleep 1; done
victim=$(pgrep -f "gloo-kill" -n)
kill -9 "$victim"; start=$(date +%s)
wait $launcher; rc=$?
echo "killed rank $victim: launcher rc=$rc after $(( $(date +%s) - start )) s; $(grep -m1 -o 'rank [0-9] exited with status [0-9]*' "$OUT/kill.log")"
