#!/usr/bin/env bash
# The H200 check of vagen train: make a Qwen2.5-VL-3B-shaped model, train a few steps of
# Sokoban (vision) with PPO+GAE and with GRPO, read the event files with tensorboard, and
# compare transformers' logits on an exported checkpoint with vagen's.
# Usage (repository root, bun and libtorch set up): bash test/training/h200/run.sh OUT_DIR
set -uo pipefail
OUT=${1:?out dir}
H=test/training/h200
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1

# 1. the export check on the tiny fixture (one CUDA training step, then transformers vs
#    vagen) and tensorboard's reader; SKIP_TINY=1 skips both
if [ "${SKIP_TINY:-0}" != 1 ]; then
bun src/cli/main.ts train test/training/digit.yaml trainer.output_dir=/tmp/run-tiny trainer.total_steps=1 model.device=cuda algorithm.adv_estimator=default_gae trainer.tensorboard=true > "$OUT/tiny-train.log" 2>&1
bun src/cli/main.ts export /tmp/run-tiny/checkpoints/step_1 --out /tmp/tiny-exported > "$OUT/export.log" 2>&1
bun $H/vagen-logits.ts /tmp/tiny-exported /tmp/vagen-logits.json >> "$OUT/export.log" 2>&1
python3 $H/check_export.py /tmp/tiny-exported /tmp/vagen-logits.json >> "$OUT/export.log" 2>&1; echo "export check rc=$?" >> "$OUT/export.log"
python3 $H/check_tensorboard.py /tmp/run-tiny/tensorboard > "$OUT/tensorboard.log" 2>&1; echo "tensorboard check rc=$?" >> "$OUT/tensorboard.log"
fi

# 2. the 3B-shaped model
[ -f /tmp/qwen3b-shaped/config.json ] || python3 $H/make_3b_shaped.py test/fixtures/qwen2_5_vl_tiny /tmp/qwen3b-shaped > "$OUT/make-model.log" 2>&1 || exit 1

# 3. a few steps each; memory sampled by nvidia-smi every second
for recipe in ppo grpo; do
  if [ $recipe = ppo ]; then args="algorithm.adv_estimator=default_gae"; else args="algorithm.adv_estimator=grpo rollout.n=4 data.train_batch_size=4 actor.ppo_mini_batch_size=4 critic.ppo_mini_batch_size=4"; fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -l 1 > "$OUT/mem-$recipe.txt" 2>/dev/null &
  SMI=$!
  timeout ${STEP_BUDGET_S:-150} bun src/cli/main.ts train $H/sokoban-3b.yaml $args trainer.output_dir=/tmp/run-3b-$recipe > "$OUT/train-$recipe.log" 2>&1
  echo "rc=$?" >> "$OUT/train-$recipe.log"
  kill $SMI
  cp /tmp/run-3b-$recipe/metrics.jsonl "$OUT/metrics-$recipe.jsonl" 2>/dev/null
  echo "peak MiB: $(sort -n "$OUT/mem-$recipe.txt" | tail -1)" >> "$OUT/train-$recipe.log"
done
