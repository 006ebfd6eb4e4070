#!/usr/bin/env bash
# The README's second command: the whole test suite (sets up first, so it works on a
# fresh clone too). Tests that need CUDA live in test/gpu/ and skip themselves without it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
# The CLI tests run the compiled binary; in this script it always exists.
export VAGEN_REQUIRE_BINARY=1
bun test --timeout 60000 "$@"
