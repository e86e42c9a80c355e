#!/usr/bin/env bash
# The GPU worker check, run from the repository root on a GPU machine
# (workers/engine/README.md, "GPU workers"). For a machine without Deno or registry access, first
# run `bash bench/tools/gpu_pack.sh` where they are and copy `.gpu/` along with the repository.
#
# On the machine it unpacks the packed deno and node_modules (when .gpu/ holds them), installs the
# Vulkan loader, probes
# cuda and webgpu as a WORKER_DEVICE=gpu worker does (bench/tools/gpu_probe.ts), and for each provider
# that loads: where onnxruntime places the model graphs' nodes (bench/tools/gpu_placement.ts), the
# engine test folder and the model parity test on that provider (SEED_TEST_EXECUTION_PROVIDER);
# then `bench:engine --ep <provider>` beside `bench:engine` on the same machine's CPU, per size.
# When no GPU provider loads, the engine tests run on the CPU so the packed toolchain is checked.
# Each stage has its own time limit and the whole stops by GPU_CHECK_BUDGET_S (default 540 s).
# Dry run on a machine without a GPU: GPU_CHECK_NO_GL=1 GPU_CHECK_AS_LOADED=cpu bash bench/tools/gpu_check.sh
#
# Results in $OUT when set, else ./.bench-out/gpu, at most 8 files:
#   summary.txt    the machine, each provider's check, each stage's exit code and seconds
#   <ep>.txt       placement, tests and bench of each GPU provider that loaded (cuda, webgpu)
#   cpu.txt        bench:engine on the CPU (or the CPU test run when no GPU provider loaded)
#   gpu_check.log  everything above in order
set -uo pipefail
USAGE="Usage: bash bench/tools/gpu_check.sh   (no arguments; settings by environment: OUT (results folder), GPU_CHECK_BUDGET_S (default 540), GPU_CHECK_NO_GL=1 and GPU_CHECK_AS_LOADED=cpu for a dry run without a GPU; workers/engine/README.md)"
# No arguments: --help/-h prints the usage; anything else is one error line and exit 2.
# shellcheck source=bench/tools/_no_args.sh
source "$(dirname "$0")/_no_args.sh"
no_args "$USAGE" bench/tools/gpu_check.sh "$@"
cd "$(dirname "$0")/../.." # the repository root
export PATH="$PATH:/usr/sbin:/sbin" # ldconfig
OUT=${OUT:-$PWD/.bench-out/gpu}
BUDGET_S=${GPU_CHECK_BUDGET_S:-540}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
START=$(date +%s)
note() { echo "$*" | tee -a "$OUT/summary.txt"; }

# stage NAME LIMIT_S FILE COMMAND…: runs COMMAND with at most LIMIT_S (less when the budget is
# nearly spent), appending its output to $OUT/FILE and one line to the summary.
stage() {
  local name=$1 limit=$2 file=$3
  shift 3
  local left=$((BUDGET_S - ($(date +%s) - START) - 5))
  if ((left < 20)); then
    note "skipped  $name (budget of ${BUDGET_S} s spent)"
    return 1
  fi
  ((limit > left)) && limit=$left
  echo "### $name (limit ${limit} s)" >>"$OUT/$file"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$OUT/$file"
  rc=${PIPESTATUS[0]}
  note "rc=$rc $(($(date +%s) - t0))s  $name"
  return "$rc"
}

# --- toolchain: deno and node_modules from .gpu/ (for a machine without registry access) -------------
unpack() { # ARCHIVE DEST
  if command -v xz >/dev/null; then
    tar -C "$2" -xJf "$1"
  else
    python3 - "$1" "$2" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="fully_trusted")
    except TypeError:  # Python < 3.12
        t.extractall(sys.argv[2])
PY
  fi
}
# On the device machine node_modules is absent (ignored files do not travel): the packed one, which
# holds only the packages these files import, is unpacked and marked. Deno's "auto" mode would
# try to install the rest of deno.lock from the registry, so deno.json is switched to "manual" for
# the run (and put back at exit); tests run with --no-check (CI type-checks; @types are not packed).
if [ ! -d node_modules/.deno ]; then
  if [ ! -f .gpu/node_modules.tar.xz ]; then
    note "Cannot run the check as node_modules or .gpu/node_modules.tar.xz must exist: run bash bench/tools/gpu_pack.sh and copy .gpu along"
    exit 2
  fi
  unpack .gpu/node_modules.tar.xz . && touch node_modules/.seed-gpu-pack
fi
if [ -f node_modules/.seed-gpu-pack ]; then
  cp deno.json .gpu/deno.json.orig
  trap 'cp .gpu/deno.json.orig deno.json' EXIT
  sed -i 's/"nodeModulesDir": "auto"/"nodeModulesDir": "manual"/' deno.json
fi
if [ -f .gpu/deno.tar.xz ]; then
  mkdir -p .gpu/bin
  [ -x .gpu/bin/deno ] || unpack .gpu/deno.tar.xz .gpu/bin
  export PATH="$PWD/.gpu/bin:$PATH"
fi
command -v deno >/dev/null || { note "Cannot run the check as deno must be on PATH or in .gpu/deno.tar.xz"; exit 2; }
export DENO_DIR=${DENO_DIR:-/tmp/seed-deno-dir} DENO_NO_UPDATE_CHECK=1 NO_COLOR=1

# --- Vulkan loader for WebGPU (Dawn); the NVIDIA ICD where the driver put it -----------------
# (GPU_CHECK_NO_GL=1 leaves / alone: for a dry run on a shared machine without a GPU.)
if [ -z "${GPU_CHECK_NO_GL:-}" ]; then
  for f in .gpu/gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
  ldconfig 2>/dev/null
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES=$nvidia_icd; fi

# --- the machine -------------------------------------------------------------------------------
{
  echo "date $(date -u +%FT%TZ), $(uname -srm), $(nproc) cores"
  echo "deno $(deno --version | head -1 | cut -d' ' -f2)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu /'
  echo "libraries: $(ldconfig -p | grep -oE 'lib(vulkan|cudart|cublas|cudnn)[^ ]*' | sort -u | tr '\n' ' ')"
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
} | tee -a "$OUT/summary.txt"

# --- which providers load ----------------------------------------------------------------------
stage "provider checks" 240 summary.txt deno run -A bench/tools/gpu_probe.ts cuda webgpu
loaded=$(grep -h '"ok":true' "$OUT/summary.txt" | grep -oE '"provider":"(cuda|webgpu)"' | cut -d'"' -f4)
# (GPU_CHECK_AS_LOADED=cpu runs the per-provider stages on the CPU: a dry run of this script.)
loaded=${GPU_CHECK_AS_LOADED:-$loaded}

for ep in $loaded; do
  stage "$ep: node placement of the train, score and decode graphs" 90 "$ep.txt" \
    deno run -A bench/tools/gpu_placement.ts --ep "$ep"
  stage "$ep: engine tests and model parity test" 150 "$ep.txt" \
    env SEED_TEST_EXECUTION_PROVIDER="$ep" deno test -A --no-check \
    tests/workers/engine/ tests/workers/model/provider_parity_test.ts
done

if [ -z "$loaded" ]; then
  note "no GPU provider loaded (reasons above); checking the packed toolchain on the CPU"
  stage "cpu: engine tests" 120 cpu.txt deno test -A --no-check tests/workers/engine/
else
  # bench:engine prints its table at the end: one run per model size, so that a size cut off by
  # its limit loses only itself. The CPU rows are the same machine's cores, for comparison.
  for size in small medium; do
    limit=$([ "$size" = small ] && echo 120 || echo 220)
    for ep in $loaded; do
      stage "$ep: bench:engine --ep $ep --only $size" "$limit" "$ep.txt" \
        deno run -A bench/engine.ts --ep "$ep" --only "$size" --threads 4 --repeats 3 --no-torch
    done
    stage "cpu: bench:engine --only $size on this machine's CPU" "$limit" cpu.txt \
      deno run -A bench/engine.ts --ep cpu --only "$size" --threads "$(nproc)" --repeats 3
  done
fi
note "done in $(($(date +%s) - START)) s"
