/**
 * A worker entry whose `seed` handler fails at once, for the demo's failure test.
 */
import { registerHandler } from "../../../workers/worker/mod.ts";
import { main } from "../../../workers/main.ts";

registerHandler("seed", () => {
  throw new Error("Cannot train in this test as the handler must fail: it is the failure fixture");
});
await main();
