#!/usr/bin/env bash
# Installs what vagen needs and is missing, then builds it. Safe to run again: each step
# is skipped when its result is already there.
#   - Bun (pinned) from npm
#   - libtorch + OpenBLAS from apt, when no libtorch is found ($LIBTORCH, python3's
#     torch, or Debian's /usr)
#   - the JavaScript dependencies, exactly as the lockfile says
#   - the libtorch shim and the single binary dist/vagen (bun build.ts)
#   - `vagen` on PATH: a link to dist/vagen in /usr/local/bin (as root), else ~/.local/bin
set -euo pipefail
cd "$(dirname "$0")/.."

BUN_VERSION=1.4.5
say() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else say "need root for: $*"; exit 1; fi; }

# Bun
if [ "$(bun --version 2>/dev/null || true)" != "$BUN_VERSION" ]; then
  command -v npm >/dev/null || { say "npm not found: install Node.js first"; exit 1; }
  say "installing bun $BUN_VERSION from npm"
  as_root npm install -g --allow-scripts=bun "bun@$BUN_VERSION" >/dev/null 2>&1 || as_root npm install -g "bun@$BUN_VERSION" >/dev/null
  hash -r
fi
say "bun $(bun --version)"

# libtorch (+ a fast BLAS for the CPU build)
have_libtorch() {
  [ -n "${LIBTORCH:-}" ] && [ -f "$LIBTORCH/include/ATen/ATen.h" ] && return 0
  python3 -c 'import torch' >/dev/null 2>&1 && return 0
  [ -f /usr/include/ATen/ATen.h ] && [ -e /usr/lib/x86_64-linux-gnu/libtorch_cpu.so ]
}
# Not `ldconfig -p | grep -q`: under pipefail, grep -q exits at the first match, ldconfig
# dies of SIGPIPE writing the rest, and the pipeline reports failure although the library
# is there. Capture the list first, then search it.
have_openblas() {
  local libs
  libs="$(ldconfig -p 2>/dev/null || true)"
  grep -q libopenblas <<<"$libs"
}
if ! have_libtorch; then
  say "installing libtorch and OpenBLAS from apt (about 530 MB)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libtorch-dev libopenblas0-pthread g++ >/dev/null
elif [ -f /usr/include/ATen/ATen.h ] && ! have_openblas; then
  say "installing OpenBLAS (matmul is ~13x slower on the reference BLAS)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-pthread >/dev/null
fi

# JavaScript dependencies, from the lockfile
bun install --frozen-lockfile >/dev/null
say "dependencies installed"

# shim + binary
bun build.ts "$@"

# `vagen` on PATH. Only a missing name or an earlier link is (re)placed: a `vagen` that is
# some other file is left alone and named.
link_into() {
  local dir="$1" link="$1/vagen" target="$PWD/dist/vagen"
  if [ -e "$link" ] && [ ! -L "$link" ]; then say "$link exists and is not a link: left alone; run $target"; return 0; fi
  if [ -w "$dir" ] || { [ ! -e "$dir" ] && mkdir -p "$dir" 2>/dev/null; }; then ln -sfn "$target" "$link"; else return 1; fi
  case ":$PATH:" in
    *":$dir:"*) say "vagen -> $link (on PATH)" ;;
    *) say "vagen -> $link; $dir is not on PATH: add it (export PATH=\"$dir:\$PATH\") or run $target" ;;
  esac
}
if [ "$(id -u)" = 0 ]; then link_into /usr/local/bin || link_into "$HOME/.local/bin"; else link_into "$HOME/.local/bin" || say "could not link vagen onto PATH: run $PWD/dist/vagen"; fi
