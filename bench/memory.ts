/**
 * Peak memory and wall time of a demo-sized job: `deno task bench:memory` (flags: `USAGE` below,
 * which `--help` prints).
 *
 * Runs the sokoban demo preset (jobs/presets.ts) in process (bench/_memory_context.ts: no
 * database or object store) in one child process per run, so each run's peak resident set
 * (`VmHWM` of /proc/self/status, MB) is its own. By default the preset is cut to demo size for a
 * bench (2 RL steps, 8 evaluation episodes per split, 40 + 16 warm-up episodes of 2 + 1 epochs);
 * `--full` runs it as the demo does. Variants of the engine's memory settings, run alternately:
 * - `default`: what jobs use (workers/engine/session.ts `sessionOptions`, Policy's call size);
 * - `arena`: onnxruntime's per-session CPU memory arena and memory pattern on, and 8,192-token
 *   calls: close to an arena-on configuration (bench/RESULTS.md has what it cost).
 * Not a test: times vary with machine load; compare the variants of one run.
 */
import { DEMO_PRESETS } from "../jobs/presets.ts";
import type { JobSpecInput } from "../jobs/spec.ts";
import { createSeedHandler } from "../workers/seed/run/handler.ts";
import type { PolicyOptions } from "../workers/model/policy.ts";
import { memoryContext } from "./_memory_context.ts";
import { benchArgs } from "./_args.ts";

/** Engine settings by variant name (see module doc). */
const VARIANTS: Record<string, PolicyOptions> = {
  default: {},
  arena: { memArena: true, memPattern: true, maxTokensPerCall: 8192 },
};

/** The demo preset cut to bench size (see module doc). */
export function benchSpec(full: boolean): JobSpecInput {
  const demo = DEMO_PRESETS.sokoban;
  if (full) return demo;
  return {
    ...demo,
    steps: 2,
    eval_every: 2,
    checkpoint_every: 2,
    eval: { ...demo.eval, episodes: 8 },
    warmup: {
      policy: { ...demo.warmup!.policy, episodes: 40, epochs: 2 },
      analyzer: { ...demo.warmup!.analyzer, episodes: 16, epochs: 1 },
    },
  };
}

/** Peak resident set of this process so far, MB. */
function peakRssMb(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(status.match(/VmHWM:\s+(\d+)/)![1]) / 1024;
}

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `Peak memory (VmHWM) and wall time of a demo-sized job, one child process per run,
alternating the engine's memory-setting variants.

Usage:
  deno task bench:memory [--repeats 1] [--variants default,arena] [--full]

Flags:
  --repeats N      rounds of every variant (default 1)
  --variants A,B   variants to run (default default,arena): default, what jobs use; arena,
                   onnxruntime's CPU memory arena and memory pattern on and 8,192-token calls
  --full           the sokoban demo preset as the demo runs it, not cut to bench size
  --child VARIANT  the child mode: one run of VARIANT in this process`;

const args = benchArgs({
  name: "bench:memory",
  usage: USAGE,
  options: {
    repeats: { type: "string", default: "1" },
    variants: { type: "string", default: "default,arena" },
    full: { type: "boolean", default: false },
    child: { type: "string" },
  },
});

if (args.child) {
  const t0 = performance.now();
  const run = memoryContext(benchSpec(args.full));
  await createSeedHandler({ engine: VARIANTS[args.child] })(run.ctx);
  const last = Math.max(...run.metrics.keys());
  console.log(JSON.stringify({
    variant: args.child,
    wall_s: Number(((performance.now() - t0) / 1000).toFixed(1)),
    peak_rss_mb: Math.round(peakRssMb()),
    success_rate: run.metrics.get(last)!["eval/test_seen/success_rate"],
  }));
} else {
  const names = args.variants.split(",");
  for (const n of names) {
    if (!VARIANTS[n]) {
      throw new Error(`Cannot run variant ${n} as it must be one of ${Object.keys(VARIANTS)}`);
    }
  }
  const rows: Record<string, unknown>[] = [];
  for (let r = 0; r < Number(args.repeats); r++) {
    for (const name of names) {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          import.meta.filename!,
          "--child",
          name,
          ...(args.full ? ["--full"] : []),
        ],
        stdout: "piped",
        stderr: "inherit",
      });
      const out = await child.output();
      if (!out.success) throw new Error(`Cannot measure variant ${name} as its run must succeed`);
      const row = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
      console.log(JSON.stringify(row));
      rows.push({ ...row, loadavg: Deno.loadavg()[0] });
    }
  }
  console.table(rows);
}
