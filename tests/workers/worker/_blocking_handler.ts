/**
 * A test handler for a compute process whose steps block it synchronously, as one long onnxruntime
 * call does: step k spins for `blockMs[k - 1]` ms (the last entry repeats; -1 spins forever),
 * then commits the step's metrics and a `step` event together (with `artifacts`, also a
 * checkpoint `state.json` and a skill library). It resumes after its last committed metrics row.
 * With `stateBytes`, every step also checkpoints `state.bin` of that many bytes (all equal to the
 * step number mod 256) and, from step 2 on, first reads the previous step's `state.bin` back and
 * checks it (throwing on a wrong length or byte).
 */
import type { JobHandler } from "../../../workers/worker/mod.ts";

/** Options of {@link createHandler} (plain data: copied into the child). */
export interface BlockingOptions {
  /** Synchronous spin per step, in ms; -1 never ends. */
  blockMs: number[];
  /** Also commit a checkpoint and a skill library with each step (objects in the store). */
  artifacts?: boolean;
  /** Size of a `state.bin` checkpointed with every step and read back by the next (see doc). */
  stateBytes?: number;
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
      const big = options.stateBytes ? await largeState(ctx, step, options.stateBytes) : [];
      await ctx.commitStep(step, {
        metrics: { step, attempt: ctx.attempt },
        events: [{ type: "step", data: { step } }],
        ...(big.length > 0 && !options.artifacts && { checkpoint: big }),
        ...(options.artifacts && {
          checkpoint: [{ name: "state.json", bytes: state }, ...big],
          skills: { json: { version: 1, step, skills: [] } },
        }),
      });
      if (ctx.draining && step < ctx.spec.steps) return "drained";
    }
  };
}

/** Checks the previous step's `state.bin` (from step 2 on) and returns this step's. */
async function largeState(
  ctx: Parameters<JobHandler>[0],
  step: number,
  bytes: number,
): Promise<{ name: string; bytes: Uint8Array }[]> {
  if (step > 1) {
    const point = await ctx.checkpointAt(step - 1);
    const prev = await point!.read("state.bin");
    const want = (step - 1) % 256;
    if (prev.length !== bytes || prev[0] !== want || prev[bytes - 1] !== want) {
      throw new Error(
        `state.bin of step ${step - 1} came back wrong: ${prev.length} bytes, first ${prev[0]}`,
      );
    }
  }
  return [{ name: "state.bin", bytes: new Uint8Array(bytes).fill(step % 256) }];
}
