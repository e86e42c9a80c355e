/**
 * `deno run -A bench/tools/gpu_probe.ts [cuda webgpu cpu]`: checks each execution provider in a
 * process of its own, as a `gpu` worker does at start (workers/engine/providers.ts), and prints one
 * JSON line per provider: `{"provider", "ok", "reason"?, "seconds"}`. Used by
 * bench/tools/gpu_check.sh.
 */
import {
  EXECUTION_PROVIDERS,
  type ExecutionProvider,
  probeProvider,
} from "../../workers/engine/mod.ts";
import { benchCommandLine } from "../_args.ts";

/** What `--help` prints. */
const USAGE = `Checks each execution provider as a gpu worker does at start; one JSON line each.

Usage: deno run -A bench/tools/gpu_probe.ts [${EXECUTION_PROVIDERS.join(" ")}]
  (no provider named: all of them)`;

const { positionals } = benchCommandLine({
  name: "bench/tools/gpu_probe.ts",
  usage: USAGE,
  options: {},
  positionals: EXECUTION_PROVIDERS.length,
});
const unknown = positionals.find((p) => !(EXECUTION_PROVIDERS as readonly string[]).includes(p));
if (unknown !== undefined) {
  console.error(
    `bench/tools/gpu_probe.ts: Unknown provider '${unknown}': one of ${
      EXECUTION_PROVIDERS.join(", ")
    } (see --help)`,
  );
  Deno.exit(2);
}
const providers = (positionals.length ? positionals : EXECUTION_PROVIDERS) as ExecutionProvider[];
for (const provider of providers) console.log(JSON.stringify(await probeProvider(provider)));
