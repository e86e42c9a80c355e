import assert from "node:assert/strict";
import { onStopSignals, SAME_PRESS_MS } from "../../jobs/mod.ts";

/** Resolves once the event loop has delivered pending signals. */
const tick = (ms = 50) => new Promise((r) => setTimeout(r, ms));

Deno.test("one Ctrl-C delivered twice stops gracefully once; a later signal stops at once", async () => {
  const calls: string[] = [];
  const remove = onStopSignals({
    first: () => calls.push("first"),
    again: () => calls.push("again"),
  }, ["SIGUSR1"]);
  try {
    Deno.kill(Deno.pid, "SIGUSR1");
    await tick();
    Deno.kill(Deno.pid, "SIGUSR1"); // forwarded by a wrapper: the same press
    await tick();
    assert.deepEqual(calls, ["first"]);
    await tick(SAME_PRESS_MS);
    Deno.kill(Deno.pid, "SIGUSR1");
    await tick();
    assert.deepEqual(calls, ["first", "again"]);
  } finally {
    remove();
  }
});
