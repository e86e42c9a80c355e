/**
 * `deno run -A bench/tools/gpu_probe.ts [cuda webgpu cpu]`: checks each execution provider in a process
 * of its own, as a `gpu` worker does at start (workers/engine/providers.ts), and prints one JSON
 * line per provider: `{"provider", "ok", "reason"?, "seconds"}`. Used by bench/tools/gpu_check.sh.
 */
import {
  EXECUTION_PROVIDERS,
  type ExecutionProvider,
  probeProvider,
} from "../../workers/engine/mod.ts";

const providers = (Deno.args.length ? Deno.args : EXECUTION_PROVIDERS) as ExecutionProvider[];
for (const provider of providers) console.log(JSON.stringify(await probeProvider(provider)));
