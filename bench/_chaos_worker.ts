/**
 * A worker process of bench/chaos.ts: the real worker (workers/main.ts) with the SEED trainer
 * registered as `deno task worker` registers it, plus the probe of bench/_checkpoint_worker.ts:
 * how late this process's event loop (the one that heartbeats) runs a 50 ms timer, logged every
 * second as `bench.lag` with the worst lateness so far, this process's peak RSS and the largest
 * peak RSS of its child processes (the compute processes) seen so far.
 */
import { main } from "../workers/main.ts";
import { registerSeedHandlers } from "../workers/seed/run/handler.ts";
import { peakRssBytes } from "./_checkpoint_handler.ts";

registerSeedHandlers();

/** The largest `VmHWM` (bytes) of this process's live children, read from `/proc`. */
function childrenPeakRssBytes(): number {
  let peak = 0;
  try {
    for (const task of Deno.readDirSync("/proc/self/task")) {
      const pids = Deno.readTextFileSync(`/proc/self/task/${task.name}/children`).trim();
      for (const pid of pids ? pids.split(" ") : []) {
        const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmHWM:\s+(\d+) kB/);
        if (m) peak = Math.max(peak, Number(m[1]) * 1024);
      }
    }
  } catch { /* a child exited meanwhile: the next sample counts it */ }
  return peak;
}
let computePeakRssBytes = 0;
let maxLateMs = 0;
let due = Date.now() + 50;
const probe = setInterval(() => {
  maxLateMs = Math.max(maxLateMs, Date.now() - due);
  due = Date.now() + 50;
}, 50);
const report = setInterval(() => {
  computePeakRssBytes = Math.max(computePeakRssBytes, childrenPeakRssBytes());
  console.error(JSON.stringify({
    msg: "bench.lag",
    maxLateMs,
    peakRssBytes: peakRssBytes(),
    computePeakRssBytes,
  }));
}, 1000);
// The probes must not keep the process alive once the worker stops.
Deno.unrefTimer(probe);
Deno.unrefTimer(report);
await main();
