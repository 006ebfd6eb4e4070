#!/usr/bin/env bash
# One pass of the generation engine on a CUDA machine: builds the shim against pip torch,
# runs test/gpu/engine*, builds the Qwen2.5-VL-3B configuration with random weights and
# times transformers' generate on it (bench/python/engine_reference.py), then runs
# bench/engine.ts on the same weights. Logs and JSON go to $OUT (default ./out).
# Expects bun on PATH and node_modules in place.
set -u
OUT=${OUT:-out}
MODEL_DIR=${MODEL_DIR:-/tmp/vagen-qwen25vl-3b-random}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

{ nvidia-smi -L; python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'; bun --version; } > "$OUT/env.txt" 2>&1

if ! bun build.ts --shim-only > "$OUT/build.log" 2>&1; then
  echo "shim build failed; see build.log" >&2
  tail -40 "$OUT/build.log" >&2
  exit 1
fi

timeout 75 bun test test/gpu/engine > "$OUT/gpu-test.log" 2>&1
echo "tests exit $?" >> "$OUT/gpu-test.log"
grep -E "^\(fail\)|^\(pass\)|^ *[0-9]+ (pass|fail|skip)|error:" "$OUT/gpu-test.log" | head -30

# REUSE_REFERENCE=path/to/hf.json skips rebuilding the model when MODEL_DIR is still there.
if [ -n "${REUSE_REFERENCE:-}" ] && [ -f "$MODEL_DIR/config.json" ]; then
  cp "$REUSE_REFERENCE" "$OUT/hf.json"
else
  timeout 140 python3 bench/python/engine_reference.py --out "$MODEL_DIR" --json "$OUT/hf.json" > "$OUT/hf.log" 2>&1
  echo "reference exit $?" >> "$OUT/hf.log"
  tail -8 "$OUT/hf.log"
fi

timeout 300 bun bench/engine.ts --model "$MODEL_DIR" --attention "${ATTENTION:-fused}" --hf "$OUT/hf.json" --out "$OUT/engine.json" > "$OUT/bench.log" 2>&1
echo "bench exit $?" >> "$OUT/bench.log"
tail -30 "$OUT/bench.log"
