/**
 * The worker process of bench/checkpoint.ts: the real worker (workers/main.ts) running
 * `_checkpoint_handler.ts` in a compute process, plus a probe that measures how late this
 * process's event loop (the one that heartbeats) runs a 50 ms timer, logged every second as
 * `bench.lag` with the worst lateness so far and this process's peak RSS.
 */
import { registerHandler } from "../workers/worker/mod.ts";
import { main } from "../workers/main.ts";
import { peakRssBytes } from "./_checkpoint_handler.ts";

registerHandler("seed", {
  module: new URL("./_checkpoint_handler.ts", import.meta.url),
  options: { stateBytes: Number(Deno.env.get("STATE_BYTES")) },
});
let maxLateMs = 0;
let due = Date.now() + 50;
const probe = setInterval(() => {
  maxLateMs = Math.max(maxLateMs, Date.now() - due);
  due = Date.now() + 50;
}, 50);
const report = setInterval(() => {
  console.error(JSON.stringify({ msg: "bench.lag", maxLateMs, peakRssBytes: peakRssBytes() }));
}, 1000);
// The probes must not keep the process alive once the worker stops.
Deno.unrefTimer(probe);
Deno.unrefTimer(report);
await main();
