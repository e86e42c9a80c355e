#!/usr/bin/env bash
# Rollouts with our inference server on a GPU as the rollout.engine endpoint, run from the
# repository root on a GPU machine (bench/README.md, "Rollout endpoints on a GPU"). Not run yet:
# prepared for when a GPU machine is lent. For a machine without Deno or registry access, first run
#   GPU_PACK_EXTRA="workers/serve/main.ts bench/serve.ts tests/workers/seed/remote_rollout_processes_test.ts" \
#     bash bench/tools/gpu_pack.sh
# where they are and copy `.gpu/` along with the repository. Needs Postgres 15's initdb and
# pg_ctl on PATH (the jobs run on a throwaway cluster, jobs/embedded/postgres_cluster.ts).
#
# Stages (each with its own time limit; all within GPU_ROLLOUT_BUDGET_S, default 540 s):
#   1. which onnxruntime provider loads (cuda, webgpu), as a GPU worker probes it;
#   2. jobs on two `deno task serve` processes with SERVE_EXECUTION_PROVIDERS=cuda,webgpu,cpu (the
#      trainer on the CPU): a serve process killed mid-step, and one left an update behind — each
#      job must succeed with each step's metrics once (tests/workers/seed/remote_rollout_processes_test.ts);
#   3. the same job as the local engine's, on the GPU servers: reported, not required (a GPU's float
#      sums differ from the CPU's, so a draw may fall the other way and the trajectories part);
#   4. bench:serve --rollout with the servers on the GPU: rollout tokens/s, local vs 2 endpoints.
# Results in $OUT when set, else ./.bench-out/gpu-rollout: summary.txt, rollout.log.
set -uo pipefail
USAGE="Usage: bash bench/gpu_rollout.sh   (no arguments; settings by environment: OUT, GPU_ROLLOUT_BUDGET_S)"
# No arguments: --help/-h prints the usage; anything else is one error line and exit 2.
# shellcheck source=bench/tools/_no_args.sh
source "$(dirname "$0")/tools/_no_args.sh"
no_args "$USAGE" bench/gpu_rollout.sh "$@"
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.bench-out/gpu-rollout}
BUDGET_S=${GPU_ROLLOUT_BUDGET_S:-540}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/rollout.log") 2>&1
START=$(date +%s)
note() { echo "$*" | tee -a "$OUT/summary.txt"; }
stage() { # NAME LIMIT_S COMMAND…
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET_S - ($(date +%s) - START) - 5))
  if ((left < 20)); then note "skipped  $name (budget spent)"; return 1; fi
  ((limit > left)) && limit=$left
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  note "rc=$rc $(($(date +%s) - t0))s  $name"
  return "$rc"
}

# toolchain from .gpu/ when the machine has none (as bench/tools/gpu_check.sh does)
if [ ! -d node_modules/.deno ] && [ -f .gpu/node_modules.tar.xz ]; then
  tar -xJf .gpu/node_modules.tar.xz && touch node_modules/.seed-gpu-pack
fi
if [ -f node_modules/.seed-gpu-pack ]; then
  cp deno.json "$OUT/deno.json.orig"
  trap 'cp "$OUT/deno.json.orig" deno.json' EXIT
  sed -i 's/"nodeModulesDir": "auto"/"nodeModulesDir": "manual"/' deno.json
fi
if [ -f .gpu/deno.tar.xz ]; then
  mkdir -p .gpu/bin && { [ -x .gpu/bin/deno ] || tar -C .gpu/bin -xJf .gpu/deno.tar.xz; }
  export PATH="$PWD/.gpu/bin:$PATH"
fi
command -v deno >/dev/null || { note "Cannot run as deno must be on PATH or in .gpu/deno.tar.xz"; exit 2; }
command -v initdb >/dev/null || note "initdb is not on PATH: the job stages will fail to start Postgres"
export DENO_DIR=${DENO_DIR:-/tmp/seed-deno-dir} DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES=$nvidia_icd; fi

{
  echo "date $(date -u +%FT%TZ), $(uname -srm), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu /'
} | tee -a "$OUT/summary.txt"

stage "provider checks" 120 deno run -A bench/tools/gpu_probe.ts cuda webgpu | tee -a "$OUT/summary.txt"
export SERVE_EXECUTION_PROVIDERS=cuda,webgpu,cpu SERVE_THREADS=4
stage "jobs on GPU serve processes: one killed mid-step, one an update behind" 200 \
  deno test -A --no-check tests/workers/seed/remote_rollout_processes_test.ts \
  --filter "/killed mid-step|one update behind/"
stage "the local engine's job on GPU serve processes (informative)" 120 \
  deno test -A --no-check tests/workers/seed/remote_rollout_processes_test.ts \
  --filter "full fine-tuning job on two serve"
stage "bench:serve --rollout, servers on the GPU" 200 \
  deno run -A bench/serve.ts --rollout --models 24m --runs 3 --threads 4
note "done in $(($(date +%s) - START)) s"
