/**
 * A worker process running {@link createHandler} of `_blocking_handler.ts` in a compute process
 * for method `seed`; `BLOCK_MS` is a comma-separated list of per-step spins (see that file),
 * `ARTIFACTS=1` adds a checkpoint and a skill library to every step, `STATE_BYTES=N` a checkpoint
 * file of N bytes that the next step reads back.
 */
import { registerHandler } from "../../../workers/worker/mod.ts";
import { main } from "../../../workers/main.ts";

registerHandler("seed", {
  module: new URL("./_blocking_handler.ts", import.meta.url),
  options: {
    blockMs: (Deno.env.get("BLOCK_MS") ?? "0").split(",").map(Number),
    artifacts: Deno.env.get("ARTIFACTS") === "1",
    stateBytes: Number(Deno.env.get("STATE_BYTES") ?? 0),
  },
});
await main();
