#!/usr/bin/env bash
# Packs what bench/tools/gpu_check.sh needs on a GPU machine that has no Deno, no npm
# registry and no Vulkan loader, into .gpu/ (ignored through .git/info/exclude):
#
#   .gpu/deno.tar.xz          this machine's deno binary (x86-64 Linux)
#   .gpu/node_modules.tar.xz  the npm packages the checked files import, linux-x64 binaries only
#   .gpu/gl/*.deb             the Vulkan loader (libvulkan1, amd64) that WebGPU's Dawn opens
#
# Usage (in a checkout whose node_modules a deno command has filled):
#   bash bench/tools/gpu_pack.sh
# then copy the checkout with `.gpu` to the GPU machine and run bench/tools/gpu_check.sh there
# (workers/engine/README.md, "GPU workers"). About 45 MB in all (deno ≈ 31 MB, onnxruntime ≈ 13 MB
# compressed).
set -euo pipefail
USAGE="Usage: bash bench/tools/gpu_pack.sh   (no arguments; GPU_PACK_EXTRA=\"FILE…\" packs what more files import)"
# No arguments: --help/-h prints the usage; anything else is one error line and exit 2.
# shellcheck source=bench/tools/_no_args.sh
source "$(dirname "$0")/_no_args.sh"
no_args "$USAGE" bench/tools/gpu_pack.sh "$@"
cd "$(git rev-parse --show-toplevel)"
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
rm -rf .gpu && mkdir -p .gpu/gl

# The files gpu_check.sh runs; every npm package they import (with its dependencies) is packed.
# (bench/tools/gpu_placement.ts imports no more at run time; its type-only imports reach the database.)
# GPU_PACK_EXTRA adds files (bench/gpu_rollout.sh packs with
# GPU_PACK_EXTRA="workers/serve/main.ts bench/serve.ts tests/workers/seed/remote_rollout_processes_test.ts").
# shellcheck disable=SC2206
FILES=(tests/workers/engine/*_test.ts tests/workers/model/provider_parity_test.ts
  bench/engine.ts bench/tools/gpu_probe.ts workers/engine/probe_main.ts ${GPU_PACK_EXTRA:-})
# `deno info` names a package "npm:/@scope/name@1.0.0[_peer…][/subpath]"; its folder is
# "@scope+name@1.0.0".
packages=$(for f in "${FILES[@]}"; do NO_COLOR=1 deno info "$f" || exit 1; done |
  grep -o 'npm:/[^ ]*' | sed -E 's|^npm:/||; s|^(@[^/]+)/|\1+|; s|/.*||; s/(@[0-9][^_]*)_.*/\1/' |
  sort -u)
dirs=(node_modules/.deno/.setup-cache.bin node_modules/.deno/.deno.lock)
for p in $packages; do
  [ -d "node_modules/.deno/$p" ] || { echo "missing node_modules/.deno/$p: run a deno command first" >&2; exit 1; }
  dirs+=("node_modules/.deno/$p")
done
# Top-level links of the packages the code imports by name (deno.json's import map).
for link in node_modules/*; do
  target=$(readlink "$link" 2>/dev/null || true)
  if [ -n "$target" ]; then
    for p in $packages; do [[ "$target" == *"/$p/"* ]] && dirs+=("$link"); done
  elif [ -d "$link" ]; then # a scope folder: its links
    for sub in "$link"/*; do
      target=$(readlink "$sub" 2>/dev/null || true)
      for p in $packages; do [[ -n "$target" && "$target" == *"/$p/"* ]] && dirs+=("$sub"); done
    done
  fi
done
ort_bin=node_modules/.deno/onnxruntime-node@1.30.0/node_modules/onnxruntime-node/bin/napi-v6
tar --exclude="$ort_bin/darwin" --exclude="$ort_bin/win32" --exclude="$ort_bin/linux/arm64" \
  -cf - "${dirs[@]}" | xz -T0 -6 >.gpu/node_modules.tar.xz
tar -C "$(dirname "$(readlink -f "$(command -v deno)")")" -cf - deno | xz -T0 -6 >.gpu/deno.tar.xz

# The Vulkan loader's Debian package (amd64 lists kept apart from the system's).
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
# shellcheck disable=SC2086
apt-get $o update >/dev/null
# shellcheck disable=SC2086
(cd .gpu/gl && apt-get $o download libvulkan1 >/dev/null)
echo "packed $(echo "$packages" | wc -w) npm packages:"
du -sh .gpu/* .gpu/gl/*
du -sh .gpu
