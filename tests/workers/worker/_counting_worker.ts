/**
 * A worker process for the kill test: registers the counting handler for method `seed` and runs
 * `workers/main.ts`. Prints `{"step": N}` on stdout after each checkpointed step.
 */
import { registerHandler } from "../../../workers/worker/mod.ts";
import { main } from "../../../workers/main.ts";
import { countingHandler } from "./_counting_handler.ts";

registerHandler(
  "seed",
  countingHandler({
    stepDelayMs: Number(Deno.env.get("STEP_DELAY_MS") ?? "50"),
    onStep: (step) => console.log(JSON.stringify({ step })),
  }),
);
await main();
