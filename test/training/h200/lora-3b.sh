#!/usr/bin/env bash
# What LoRA saves at Qwen2.5-VL-3B's shape on one GPU: the same Sokoban steps (bf16, the
# 3B-shaped model of make_3b_shaped.py with Qwen's 151,936-row vocabulary) trained
#   grpo-full   GRPO, every weight trained
#   grpo-lora   GRPO, actor.lora_rank=64 (alpha 32, all-linear: VAGEN's LoRA recipes)
#   ppo-lora    PPO with a critic, both LoRA over one shared frozen base
# each for STEPS steps, GPU memory sampled by nvidia-smi every 0.5 s; a summary line per
# recipe (peak MiB, mean step seconds after the first) goes to OUT/summary.txt.
# Usage (repository root, bun and libtorch set up): bash test/training/h200/lora-3b.sh OUT_DIR
set -uo pipefail
OUT=${1:?out dir}
H=test/training/h200
STEPS=${STEPS:-3}
mkdir -p "$OUT"
source $H/model-3b-vocab.sh
LORA="actor.lora_rank=64 actor.lora_alpha=32"
for recipe in grpo-full grpo-lora ppo-lora; do
  case $recipe in
    grpo-full) args="algorithm.adv_estimator=grpo rollout.n=4 data.train_batch_size=4 actor.ppo_mini_batch_size=4" ;;
    grpo-lora) args="algorithm.adv_estimator=grpo rollout.n=4 data.train_batch_size=4 actor.ppo_mini_batch_size=4 $LORA" ;;
    ppo-lora) args="algorithm.adv_estimator=default_gae $LORA critic.lora_rank=64 critic.lora_alpha=32" ;;
  esac
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/mem-$recipe.txt" 2>/dev/null &
  SMI=$!
  timeout ${STEP_BUDGET_S:-170} bun src/cli/main.ts train $H/sokoban-3b.yaml model.model_dir=$MODEL $args trainer.total_steps=$STEPS trainer.output_dir=/tmp/run-lora-$recipe > "$OUT/train-$recipe.log" 2>&1
  rc=$?
  kill $SMI
  cp /tmp/run-lora-$recipe/metrics.jsonl "$OUT/metrics-$recipe.jsonl" 2>/dev/null
  peak=$(sort -n "$OUT/mem-$recipe.txt" | tail -1)
  steps=$(python3 -c "
import json,sys
rows=[json.loads(l) for l in open('$OUT/metrics-$recipe.jsonl')] if __import__('os').path.exists('$OUT/metrics-$recipe.jsonl') else []
t=[r['timing_s/step'] for r in rows[1:]]
u=[r.get('timing_s/update_actor',0)+r.get('timing_s/update_critic',0) for r in rows[1:]]
print(f'steps={len(rows)} step_s={sum(t)/len(t):.1f} update_s={sum(u)/len(u):.1f}' if t else f'steps={len(rows)}')")
  echo "$recipe rc=$rc peak_mib=$peak $steps" | tee -a "$OUT/summary.txt"
done
