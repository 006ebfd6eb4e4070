#!/usr/bin/env bash
# One pass of the tensor library on a CUDA machine: builds the shim against pip torch,
# writes the safetensors fixtures with Python, runs the torch test suites on CUDA and
# the dispatch / matmul benchmarks next to PyTorch eager. Logs go to $OUT (default ./out).
# Expects bun on PATH and node_modules in place.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; bun --version; } > "$OUT/env.txt" 2>&1

python3 test/fixtures/safetensors/make_fixtures.py "$OUT/fixtures" > "$OUT/fixtures.log" 2>&1 \
  && cp -r "$OUT/fixtures/." test/fixtures/safetensors/ && tar cf "$OUT/fixtures.tar" -C "$OUT" fixtures && rm -rf "$OUT/fixtures"

if ! bun build.ts --shim-only > "$OUT/build.log" 2>&1; then
  echo "shim build failed; see build.log" >&2
  tail -30 "$OUT/build.log" >&2
  # build.ts stops at the first failing file: syntax-check every file to see all errors.
  T=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
  for f in ffi/*.cpp; do
    g++ -std=c++17 -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -DVAGEN_WITH_CUDA=1 -I"$T/include" \
      -I"$T/include/torch/csrc/api/include" -I"$CUDA_INC" -Iffi "$f" > "$OUT/syntax_$(basename "$f").log" 2>&1 &
  done
  wait
  grep -h "error" "$OUT"/syntax_*.log | head -40 >&2
  python3 bench/torch_dispatch.py cuda > "$OUT/bench_py_cuda.json" 2> "$OUT/bench_py.err"
  exit 1
fi

bun test test/torch test/gpu/torch- > "$OUT/test.log" 2>&1
echo "tests exit $?" >> "$OUT/test.log"
grep -E "^ *[0-9]+ (pass|fail|skip)" "$OUT/test.log"
grep -B 12 -E "^\(fail\)" "$OUT/test.log" | head -150

# TypeScript and PyTorch eager alternate, three rounds each, so both see the same
# machine state; compare the per-metric minimum.
for round in 1 2 3; do
  for dev in cuda cpu; do
    bun bench/torch-dispatch.ts $dev > "$OUT/bench_ts_${dev}_$round.json" 2> "$OUT/bench_ts_${dev}_$round.err"
    python3 bench/torch_dispatch.py $dev > "$OUT/bench_py_${dev}_$round.json" 2> "$OUT/bench_py_${dev}_$round.err"
  done
done
tail -n +1 "$OUT"/bench_*.json

# The device returns a limited number of files: pack everything into one archive.
tar czf "$OUT.tgz" -C "$OUT" . && rm -rf "$OUT"/* && mv "$OUT.tgz" "$OUT/results.tgz"
