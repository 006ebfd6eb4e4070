#!/usr/bin/env bash
# Runs a vagen binary the way a user who downloaded it would: copied alone into an empty
# folder with a model directory copied next to it, `vagen doctor` twice (the first run
# compiles the shim when the binary carries none for this libtorch; the second reuses
# it), then one `vagen generate`. Prints each command's wall time.
#   bash scripts/binary-proof.sh BINARY MODEL_DIR DEVICE   (DEVICE: cpu or cuda)
set -uo pipefail
[ $# = 3 ] || { echo "usage: $0 BINARY MODEL_DIR cpu|cuda" >&2; exit 2; }
binary=$(realpath "$1"); model=$(realpath "$2"); device=$3
dir=$(mktemp -d); cd "$dir"
cp "$binary" vagen; cp -r "$model" model
timed() {
  local start rc; start=$(date +%s.%N); "$@"; rc=$?
  echo "== $(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }') s, exit $rc: $*"
}
echo "### in $dir; shim cache: ${VAGEN_CACHE_DIR:-~/.cache/vagen}"
echo "### vagen doctor, first run"; timed ./vagen doctor
echo "### vagen doctor, second run"; timed ./vagen doctor
echo "### vagen generate on $device"; timed ./vagen generate model --prompt "Say hi" --device "$device" --max-tokens 8 --json
