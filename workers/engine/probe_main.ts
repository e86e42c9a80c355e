/**
 * Entry of a provider-check process (started by `probeProvider` in providers.ts):
 * `deno run -A workers/engine/probe_main.ts <cpu|cuda|webgpu>` checks that one provider in this
 * process and prints the {@link ProviderCheck} as one JSON line after `PROBE_LINE_PREFIX` on
 * stdout. The native loaders' own messages go to stderr, which the parent reads for the reason.
 */
import { checkProvider, PROBE_LINE_PREFIX, type ProviderCheck } from "./providers.ts";
import type { ExecutionProvider } from "./session.ts";

const provider = Deno.args[0] as ExecutionProvider;
if (!["cpu", "cuda", "webgpu"].includes(provider)) {
  console.error(
    `Cannot check an execution provider as the argument must be cpu, cuda or webgpu: current value is ${provider}`,
  );
  Deno.exit(2);
}
const check: ProviderCheck = await checkProvider(provider);
console.log(PROBE_LINE_PREFIX + JSON.stringify(check));
// Exit at once: a GPU provider's threads can keep the process alive after the session is released.
Deno.exit(0);
