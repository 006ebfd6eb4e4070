#!/usr/bin/env bash
# The README's first command: set everything up, then run the main job: check the
# installation, then evaluate a model run in-process on Sokoban and FrozenLake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
./dist/vagen doctor
echo
./dist/vagen eval examples/eval/quickstart.yaml
