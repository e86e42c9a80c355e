/**
 * The handler of bench/checkpoint.ts (run in a compute process): each step holds a model-sized
 * state (weights and AdamW's two moments, `stateBytes` in all, split in three files), reads the
 * previous step's state back from its checkpoint (from step 2 on), and commits the step's state as
 * its checkpoint. It logs `bench.step` with the seconds of each and its process's peak RSS.
 */
import type { JobHandler } from "../workers/worker/mod.ts";

/** Options of {@link createHandler}. */
export interface CheckpointBenchOptions {
  /** Bytes of one step's state (three files of a third each). */
  stateBytes: number;
}

const FILES = ["model.safetensors", "optimizer.exp_avg.bin", "optimizer.exp_avg_sq.bin"];

/** Peak resident set size of this process, bytes (Linux `VmHWM`). */
export function peakRssBytes(): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(/VmHWM:\s+(\d+) kB/);
  return m ? Number(m[1]) * 1024 : NaN;
}

/** The handler (see module doc). */
export function createHandler(options: CheckpointBenchOptions): JobHandler {
  return async (ctx) => {
    const part = Math.floor(options.stateBytes / FILES.length);
    for (let step = 1; step <= ctx.spec.steps; step++) {
      let resumeS = 0;
      if (step > 1) {
        const t0 = performance.now();
        const point = await ctx.checkpointAt(step - 1);
        for (const name of FILES) {
          const bytes = await point!.read(name);
          if (bytes.length !== part || bytes[part - 1] !== (step - 1) % 256) {
            throw new Error(`${name} of step ${step - 1} came back wrong`);
          }
        }
        resumeS = (performance.now() - t0) / 1000;
      }
      // Fresh state each step (a real step rewrites every weight and moment).
      const state = FILES.map((name) => ({ name, bytes: new Uint8Array(part).fill(step % 256) }));
      const t1 = performance.now();
      await ctx.commitStep(step, { metrics: { step }, checkpoint: state });
      const commitS = (performance.now() - t1) / 1000;
      ctx.log.info("bench.step", { step, commitS, resumeS, peakRssBytes: peakRssBytes() });
    }
  };
}
