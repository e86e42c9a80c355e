/**
 * Runs one JobSpec in process (no database, no store) and prints its step-0 and final eval and
 * the wall time: the tool used to size `jobs/presets.ts`.
 *
 *     deno run -A bench/tools/preset.ts sokoban            # the DEMO_PRESETS entry
 *     deno run -A bench/tools/preset.ts spec.json          # any JobSpec file
 *     PRESET_OVERRIDES='{"steps": 3}' deno run -A bench/tools/preset.ts sokoban
 *     # every step's metrics; the last skill library; eval and rollout dumps:
 *     PRESET_METRICS_OUT=run.jsonl deno run -A bench/tools/preset.ts sokoban
 *     PRESET_SKILLS_OUT=skills.json deno run -A bench/tools/preset.ts sokoban
 *     PRESET_TRAJECTORIES_OUT=t.json deno run -A bench/tools/preset.ts sokoban
 *     # onnxruntime threads (default 2):
 *     PRESET_THREADS=1 deno run -A bench/tools/preset.ts sokoban
 *
 * The thread count changes onnxruntime's float reductions, so a run at 1 thread stands in for
 * another CPU's kernels (README.md, "What to expect").
 */
import { DEMO_PRESETS } from "../../jobs/presets.ts";
import { createSeedHandler } from "../../workers/seed/run/handler.ts";
import { memoryContext } from "../_memory_context.ts";
import { benchCommandLine } from "../_args.ts";

/** What `--help` prints. */
const USAGE = `Runs one JobSpec in process; prints its step-0 and final eval and the wall time.

Usage: deno run -A bench/tools/preset.ts [NAME | SPEC.json]
  NAME        a DEMO_PRESETS entry of jobs/presets.ts (default sokoban)
  SPEC.json   any JobSpec file
Settings (environment): PRESET_OVERRIDES (JSON merged into the spec), PRESET_METRICS_OUT,
PRESET_SKILLS_OUT, PRESET_TRAJECTORIES_OUT (files to write), PRESET_THREADS (default 2)`;

const arg = benchCommandLine({
  name: "bench/tools/preset.ts",
  usage: USAGE,
  options: {},
  positionals: 1,
}).positionals[0] ?? "sokoban";
if (!arg.endsWith(".json") && !Object.hasOwn(DEMO_PRESETS, arg)) {
  console.error(
    `bench/tools/preset.ts: Unknown preset '${arg}': one of ${
      Object.keys(DEMO_PRESETS).join(", ")
    }, or a JobSpec .json file (see --help)`,
  );
  Deno.exit(2);
}
const base = arg.endsWith(".json") ? JSON.parse(await Deno.readTextFile(arg)) : DEMO_PRESETS[arg];
const overrides = JSON.parse(Deno.env.get("PRESET_OVERRIDES") ?? "{}");
const merge = (a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> => {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] = v && typeof v === "object" && !Array.isArray(v) && typeof a[k] === "object"
      ? merge(a[k] as Record<string, unknown>, v as Record<string, unknown>)
      : v;
  }
  return out;
};
const spec = merge(base, overrides);
const t0 = performance.now();
const since = () => ((performance.now() - t0) / 1000).toFixed(1);
const run = memoryContext(spec as never, {
  onEvent: (type, data) => {
    if (type === "stage") return;
    const short = Object.fromEntries(
      Object.entries(data).filter(([k]) => !k.startsWith("families")).map((
        [k, v],
      ) => [k, typeof v === "number" ? Number(v.toFixed(3)) : v]),
    );
    console.log(`[${since()}s] ${type} ${JSON.stringify(short)}`);
  },
});
const trajectoriesOut = Deno.env.get("PRESET_TRAJECTORIES_OUT");
const dumps: unknown[] = [];
if (trajectoriesOut) {
  // The in-memory context keeps no dumps; this one keeps them for the file written at the end.
  const commitStep = run.ctx.commitStep.bind(run.ctx);
  run.ctx.saveTrajectories = () => Promise.resolve({} as never);
  run.ctx.commitStep = (step, commit) => {
    for (const d of commit.trajectories ?? []) dumps.push(d.json);
    return commitStep(step, commit);
  };
}
const threads = Number(Deno.env.get("PRESET_THREADS") ?? "2");
if (!Number.isInteger(threads) || threads < 1) {
  throw new Error(
    `Cannot run as PRESET_THREADS must be an integer ≥ 1: current value is ${threads}`,
  );
}
await createSeedHandler({ engine: { threads } })(run.ctx);
if (trajectoriesOut) await Deno.writeTextFile(trajectoriesOut, JSON.stringify(dumps));
const steps = [...run.metrics.keys()].sort((a, b) => a - b);
const last = steps.at(-1)!;
const pick = (m: Record<string, number>) =>
  Object.fromEntries(Object.entries(m).filter(([k]) => /^eval\/[a-z_]+\/success_rate$/.test(k)));
console.log(JSON.stringify({
  wall_s: Number(since()),
  threads,
  loadavg: Deno.loadavg(),
  step0: pick(run.metrics.get(0)!),
  [`step${last}`]: pick(run.metrics.get(last)!),
}));
const metricsOut = Deno.env.get("PRESET_METRICS_OUT");
if (metricsOut) {
  await Deno.writeTextFile(
    metricsOut,
    steps.map((step) => JSON.stringify({ step, ...run.metrics.get(step) }) + "\n").join(""),
  );
}
const skillsOut = Deno.env.get("PRESET_SKILLS_OUT");
if (skillsOut) {
  const last = [...run.skills.keys()].sort((a, b) => a - b).at(-1);
  await Deno.writeTextFile(
    skillsOut,
    JSON.stringify(last === undefined ? null : run.skills.get(last)),
  );
}
