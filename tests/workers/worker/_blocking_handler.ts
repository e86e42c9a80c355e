/**
 * A test handler for a compute process whose steps block it synchronously, as one long onnxruntime
 * call does: step k spins for `blockMs[k - 1]` ms (the last entry repeats; -1 spins forever),
 * then commits the step's metrics and a `step` event together (with `artifacts`, also a
 * checkpoint `state.json` and a skill library). It resumes after its last committed metrics row.
 */
import type { JobHandler } from "../../../workers/worker/mod.ts";

/** Options of {@link createHandler} (plain data: copied into the child). */
export interface BlockingOptions {
  /** Synchronous spin per step, in ms; -1 never ends. */
  blockMs: number[];
  /** Also commit a checkpoint and a skill library with each step (objects in the store). */
  artifacts?: boolean;
}

/** The handler (see module doc); runs `ctx.spec.steps` steps numbered 1…steps. */
export function createHandler(options: BlockingOptions): JobHandler {
  return async (ctx) => {
    let start = 1;
    while (start <= ctx.spec.steps && (await ctx.stepRecord(start)).metrics) start++;
    for (let step = start; step <= ctx.spec.steps; step++) {
      const ms = options.blockMs[Math.min(step, options.blockMs.length) - 1];
      const until = ms < 0 ? Infinity : Date.now() + ms;
      while (Date.now() < until) { /* a synchronous stretch of compute */ }
      const state = new TextEncoder().encode(JSON.stringify({ step, attempt: ctx.attempt }));
      await ctx.commitStep(step, {
        metrics: { step, attempt: ctx.attempt },
        events: [{ type: "step", data: { step } }],
        ...(options.artifacts && {
          checkpoint: [{ name: "state.json", bytes: state }],
          skills: { json: { version: 1, step, skills: [] } },
        }),
      });
      if (ctx.draining && step < ctx.spec.steps) return "drained";
    }
  };
}
