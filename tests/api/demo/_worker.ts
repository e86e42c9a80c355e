/**
 * A worker entry for the demo's end-to-end test: registers {@link demoFixtureHandler} for
 * `seed` and `grpo` and runs `workers/main.ts`. When the SEED trainer registers the real
 * handlers in workers/main.ts, the test switches to that entry (see tests/api/demo/demo_test.ts).
 */
import { registerHandler } from "../../../workers/worker/mod.ts";
import { main } from "../../../workers/main.ts";
import { demoFixtureHandler } from "./_handler.ts";

registerHandler("seed", demoFixtureHandler);
registerHandler("grpo", demoFixtureHandler);
await main();
