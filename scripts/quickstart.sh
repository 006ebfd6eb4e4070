#!/usr/bin/env bash
# The README's first command: set everything up, then run the main job: check the
# installation, then `vagen demo` (a small vision-language policy learns FrozenLake from
# its board images: a short supervised warm start, then RL, then validation).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
./dist/vagen doctor
echo
# The demo's CPU recipe runs libtorch on one thread; with more OpenMP threads started
# the idle ones spin and take a core for nothing.
OMP_NUM_THREADS=1 ./dist/vagen demo
