/**
 * The execution provider the engine and model tests run their sessions on:
 * `SEED_TEST_EXECUTION_PROVIDER` (cpu, cuda or webgpu; default cpu). bench/tools/gpu_check.sh sets
 * it on a machine with a GPU; float64 graphs then run on the CPU anyway (GPU providers have float32
 * kernels only), so the float32 tests are the ones that check the GPU.
 */
import type { ExecutionProvider } from "../../../workers/engine/mod.ts";

const value = Deno.env.get("SEED_TEST_EXECUTION_PROVIDER") || "cpu";
if (!["cpu", "cuda", "webgpu"].includes(value)) {
  throw new RangeError(
    `Cannot run the tests as SEED_TEST_EXECUTION_PROVIDER must be cpu, cuda or webgpu: current value is ${value}`,
  );
}

/** The provider under test (default cpu). */
export const TEST_EP = value as ExecutionProvider;

/** True when `SEED_TEST_EXECUTION_PROVIDER` names a provider (set by bench/tools/gpu_check.sh). */
export const TEST_EP_SET = Deno.env.get("SEED_TEST_EXECUTION_PROVIDER") !== undefined;
