#!/usr/bin/env bash
# NCCL on one GPU: `vagen train` launched as a torchrun rank of a world of one runs the
# data-parallel path (store exchanges, the gradient reducer's hooks launching NCCL
# all-reduces from the autograd engine's device thread, ZeRO-2's sharded clipping) and must
# train as the plain run does. Three steps of the tiny fixture on DigitEnv, f32 on CUDA:
# plain, one NCCL rank, one NCCL rank with ZeRO-2; the metrics compared to 1e-5.
# Usage (repository root, bun and libtorch set up): bash test/training/h200/nccl-one-rank.sh OUT_DIR
set -uo pipefail
OUT=${1:?out dir}
mkdir -p "$OUT"
common="test/training/digit.yaml model.device=cuda model.dtype=f32 trainer.total_steps=3 trainer.save_freq=0 algorithm.rollout_correction.rollout_is=null --no-tui --quiet-phases"
bun src/cli/main.ts train $common trainer.output_dir=/tmp/nccl-plain > "$OUT/plain.log" 2>&1; echo "plain rc=$?"
for variant in rank zero2; do
  extra="trainer.ddp_bucket_mb=0.1"
  [ $variant = zero2 ] && extra="$extra trainer.zero_stage=2"
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANDOM % 1000)) WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 \
    bun src/cli/main.ts train $common $extra trainer.output_dir=/tmp/nccl-$variant > "$OUT/$variant.log" 2>&1; echo "$variant rc=$?"
  python3 test/training/h200/compare_metrics.py /tmp/nccl-plain /tmp/nccl-$variant "$variant"
done
