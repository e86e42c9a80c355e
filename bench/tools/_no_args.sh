#!/usr/bin/env bash
# Sourced by the bench shell scripts that take no arguments (bench/gpu_rollout.sh,
# bench/tools/gpu_check.sh, bench/tools/gpu_pack.sh), so they answer their command line as the
# Deno tools do (bench/_args.ts; checked by bench/tests/cli_test.ts).

# no_args USAGE NAME ARG…: with --help or -h among ARG (before any other argument) prints USAGE to
# stdout and exits 0; at the first other argument prints one line to stderr that starts with NAME
# (`NAME: Unknown option '--nope' (see --help)` for a flag) and exits 2. Returns when ARG is empty.
no_args() {
  local usage=$1 name=$2 arg
  shift 2
  for arg in "$@"; do
    case $arg in
    -h | --help) echo "$usage"; exit 0 ;;
    -*) echo "$name: Unknown option '$arg' (see --help)" >&2; exit 2 ;;
    *) echo "$name: Unexpected argument '$arg'. This command does not take positional arguments (see --help)" >&2; exit 2 ;;
    esac
  done
}
