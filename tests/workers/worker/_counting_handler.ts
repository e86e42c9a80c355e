/**
 * A test handler that behaves like a trainer: it resumes from its latest checkpoint, and for each
 * step records metrics, saves a checkpoint (`state.json` with the step) and emits a `step` event.
 * It drains after the current step and stops when `ctx.signal` aborts.
 */
import type { JobHandler } from "../../../workers/worker/mod.ts";

/** Options of {@link countingHandler}. */
export interface CountingOptions {
  /** Delay per step in ms (the "work"); 0 yields once. */
  stepDelayMs?: number;
  /** Called after each step is checkpointed. */
  onStep?: (step: number, attempt: number) => void;
}

/** Makes the handler (see module doc); runs `ctx.spec.steps` steps numbered 1…steps. */
export function countingHandler(options: CountingOptions = {}): JobHandler {
  return async (ctx) => {
    const resume = await ctx.latestCheckpoint();
    let start = 1;
    if (resume) {
      const state = JSON.parse(new TextDecoder().decode(await resume.read("state.json")));
      start = state.step + 1;
      await ctx.emit("resumed", { from_step: state.step });
    }
    const total = ctx.spec.steps;
    for (let step = start; step <= total; step++) {
      ctx.signal.throwIfAborted();
      await new Promise((r) => setTimeout(r, options.stepDelayMs ?? 0));
      await ctx.setProgress({ stage: "train", step, totalSteps: total });
      await ctx.recordMetrics(step, { step, attempt: ctx.attempt, reward: step / total });
      await ctx.saveCheckpoint(step, [
        { name: "state.json", bytes: new TextEncoder().encode(JSON.stringify({ step })) },
      ]);
      await ctx.emit("step", { step });
      options.onStep?.(step, ctx.attempt);
      if (ctx.draining && step < total) return "drained";
    }
  };
}
