/**
 * `deno task bench:learn`: learning curves of the paper's arms over seeds (bench/README.md).
 *
 * For each seed and environment (sokoban and household by default; `sokoban-demo`,
 * `household-demo` and `household-hard` (all six families, the sparse-signal regime) are the
 * presets of jobs/presets.ts; `search` is search-augmented QA; the vision tasks `sokoban-image` and
 * `ezpoints` run builtin:tiny-vl on image observations, `ezpoints-text` builtin:tiny on the text
 * render of the same game): one warm-up job (`sft`: policy SFT and analyzer SFT) makes a
 * checkpoint; one RL job per arm of `--arms` (default `grpo,seed`; bench/_learn_arms.ts: `grpo`,
 * `gigpo`, `seed`, `seed-gigpo`, `seed-oracle`) then starts from it (`job:<warm-up>@0`,
 * `warmup.skip`), with that seed as `random_seed` and the same B, G and steps (so the same
 * samples, steps × B × G episodes, and the same evaluation tasks), evaluating test_seen and
 * test_unseen every `--eval-every` steps. The `--baseline` arm (default `grpo`, one of `--arms`)
 * runs first; every other arm is reported as its paired difference from it. The jobs run in process
 * on the real trainer handler (no database or store: see bench/_memory_context.ts).
 *
 * Seeds run outermost, so a run stopped early has every env at fewer seeds. After each job a
 * progress line goes to stderr and the outputs are rewritten:
 * - `<out>/learn.csv`: per (env, arm, seed, step, split) success_rate and score with that
 *   seed's Wilson 95% interval over its evaluation episodes, then rows with seed=`mean`: the mean
 *   over seeds with the 95% t-interval over seeds;
 * - `<out>/learn_diff.csv`: arm − baseline per (env, arm, step, split), paired by seed, with its
 *   95% t-interval;
 * - `<out>/learn.svg`: one panel per (env, split), mean curves with interval bands;
 * - `<out>/learn_signal.csv`: per (env, arm, seed, update) SEED's signal metrics — Δ on won and
 *   lost trajectories' tokens, corr(Δ, A), the share of all-zero-advantage groups, the analyzer
 *   parse rate, skill well-formedness and truthfulness (bench/_learn_signal.ts);
 * - `<out>/skills.jsonl`: the skill library each SEED-method run committed, one line per
 *   (env, arm, seed, update) that committed one — the last update unless `--extra` sets
 *   `checkpoint_every` — in the stored form `GET /v1/jobs/{id}/skills` serves
 *   (bench/_learn_skills.ts);
 * - `<out>/metrics.jsonl`: every RL job's metrics, one line per (env, arm, seed, step), so two
 *   runs (e.g. before and after a change) can be diffed metric by metric;
 * - `<out>/learn_warmup.csv` and `<out>/warmup.jsonl`: per (env, seed) the warm-up's step-0
 *   metrics — SFT steps, the last held-out check, the skill check (success without / with the
 *   reference skill, Δ on lost tokens) — the regime every arm starts from (bench/_learn_warmup.ts);
 *   `warmup.jsonl` also names the code that ran (`code`: the first 12 hex digits of the digest
 *   of bench/_warmup_cache.ts, also on the settings line).
 * At the end a Markdown table, the samples each arm needs to reach the baseline's final mean
 * success, seconds per update of each arm, the warm-ups' table and the curves as Mermaid
 * `xychart-beta` blocks (for a README) go to stdout. Statistics: bench/_learn_stats.ts.
 *
 * Flags: `USAGE` below, which `--help` prints. Run by hand; never in CI.
 */
import { DEMO_PRESETS } from "../jobs/presets.ts";
import { type JobSpecInput, parseJobSpec } from "../jobs/spec.ts";
import { getEnvironment } from "../workers/envs/registry.ts";
import { createSeedHandler } from "../workers/seed/run/handler.ts";
import { type CheckpointShelf, memoryContext } from "./_memory_context.ts";
import {
  diffCsv,
  type RunInfo,
  runReport,
  type RunTiming,
  seedCsv,
  type SeedRow,
  summarize,
  summaryTable,
} from "./_learn_report.ts";
import { learnMermaid, learnPlot } from "./_learn_plot.ts";
import { warmupCsv, type WarmupRow, warmupRow, warmupTable } from "./_learn_warmup.ts";
import { signalCsv, type SignalRow, signalRows, signalSummary } from "./_learn_signal.ts";
import { ARMS, parseArms } from "./_learn_arms.ts";
import { skillLines as runSkillLines } from "./_learn_skills.ts";
import { benchArgs } from "./_args.ts";
import { warmupCacheKey, warmupCodeDigest } from "./_warmup_cache.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `Learning curves of the paper's arms over seeds (bench/README.md).

Usage:
  deno task bench:learn [--arms grpo,seed] [--baseline grpo]
    [--seeds 3 | --seed-list 1,2,3] [--seed 0] [--envs sokoban,household]
    [--env search] [--steps 12] [--eval-every 4] [--warmup-episodes 64] [--eval-episodes 32]
    [--opd-coef 0.01] [--extra '{"optim":{"lr":3e-4}}'] [--out .bench-out]
    [--base-extra '{"seed":{"analyzer_max_steps":20}}'] [--warmup-cache DIR] [--threads 2]
  deno task bench:learn --report out1,out2 [--arms grpo,seed] [--baseline grpo] [--out DIR]

Flags:
  --arms A,B           arms to run, comma-separated (default grpo,seed): grpo, gigpo, seed,
                       seed-gigpo, seed-oracle (bench/_learn_arms.ts)
  --baseline ARM       the arm every other arm is paired with; one of --arms, run first
                       (default grpo)
  --envs E,F           bench environments (default sokoban,household): sokoban, household,
                       webshop, search, the vision tasks sokoban-image and ezpoints
                       (builtin:tiny-vl), ezpoints-text (builtin:tiny on the text render), and
                       the presets of jobs/presets.ts: sokoban-demo, household-demo,
                       household-hard (the sparse-signal regime)
  --env E              one more environment; may repeat, and drops the --envs default
  --seeds N            runs seeds --seed … --seed+N−1 (default 3)
  --seed S             the first seed (default 0)
  --seed-list S,T      the seeds to run, instead of --seeds and --seed
  --steps N            RL updates per job (default 12)
  --eval-every N       evaluation interval, in updates (default 4)
  --warmup-episodes N  warm-up demonstrations; not for the presets (default 64)
  --eval-episodes N    evaluation episodes per split (default 32)
  --opd-coef X         λ_opd (seed.opd_coef) of the RL jobs
  --extra JSON         deep-merged into every RL job's spec (objects merge, other values replace;
                       not method, random_seed or model), so variants compare without editing
                       code; an arm's own field (seed-gigpo's advantage.estimator) is merged after
                       it and wins. Neither --opd-coef nor --extra changes the warm-up
  --base-extra JSON    merged the same way into every job's spec, the warm-up's included (for
                       settings the warm-up reads too, such as the analyzer's window); it changes
                       the warm-up cache key
  --warmup-cache DIR   keeps each warm-up's step-0 checkpoint under DIR/<key>, the key a SHA-256
                       of its spec, the thread count and the code: every *.ts, *.js and *.json
                       file of workers/ and jobs/ (tracked or not ignored, as in the working
                       tree), bench/_memory_context.ts, deno.json and deno.lock. A later run with
                       the same key loads it instead of training again (runs are reproducible for
                       a spec, seed, thread count and code); after a code change it trains anew.
                       Needs git. The code's digest is on the settings line and in warmup.jsonl
  --threads N          onnxruntime's intra-op threads (default 2; another count changes the float
                       reductions, standing in for another CPU; part of the warm-up cache key)
  --report D1,D2       runs nothing: summarises earlier runs' output folders as one run (their
                       metrics.jsonl and warmup.jsonl), so seeds and arms can run as separate
                       processes; folders holding one seed's warm-up must agree on it. Their
                       skills.jsonl files are concatenated as they are (a folder without one
                       adds nothing)
  --out DIR            output folder (default .bench-out)`;

const args = benchArgs({
  name: "bench:learn",
  usage: USAGE,
  options: {
    envs: { type: "string" },
    env: { type: "string", multiple: true },
    steps: { type: "string", default: "12" },
    "eval-every": { type: "string", default: "4" },
    seed: { type: "string", default: "0" },
    seeds: { type: "string", default: "3" },
    "seed-list": { type: "string" },
    out: { type: "string", default: ".bench-out" },
    "warmup-episodes": { type: "string", default: "64" },
    "eval-episodes": { type: "string", default: "32" },
    "opd-coef": { type: "string" },
    extra: { type: "string" },
    "base-extra": { type: "string" },
    "warmup-cache": { type: "string" },
    arms: { type: "string", default: "grpo,seed" },
    threads: { type: "string", default: "2" },
    report: { type: "string" },
    baseline: { type: "string", default: "grpo" },
  },
});

/** Exits with a usage error naming the flag. */
function usage(message: string): never {
  console.error(`bench:learn: ${message}`);
  Deno.exit(2);
}

/** A non-negative integer flag, or a usage error. */
function intFlag(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    usage(`Cannot use --${name} as it must be a non-negative integer: current value is ${value}`);
  }
  return n;
}

/** Bench environment names in the order given (`--envs` list, then each `--env`). */
const envNames = [
  ...(args.envs ?? (args.env ? "" : "sokoban,household")).split(",").filter((e) => e !== ""),
  ...(args.env ?? []),
];
const seeds = args["seed-list"] !== undefined
  ? args["seed-list"].split(",").filter((s) => s !== "").map((s) => intFlag("seed-list", s))
  : Array.from(
    { length: intFlag("seeds", args.seeds) },
    (_, i) => intFlag("seed", args.seed) + i,
  );
if (seeds.length === 0) usage("Cannot run as --seeds/--seed-list must name at least one seed");
if (new Set(seeds).size !== seeds.length) {
  usage(`Cannot use --seed-list as its seeds must differ: current value is ${args["seed-list"]}`);
}
/**
 * The arms in run order: the baseline first (each other arm's log line then has its difference).
 */
const { arms, baseline } = (() => {
  try {
    const parsed = parseArms(args.arms, args.baseline);
    return {
      ...parsed,
      arms: [parsed.baseline, ...parsed.arms.filter((a) => a !== parsed.baseline)],
    };
  } catch (error) {
    usage((error as Error).message);
  }
})();
const steps = intFlag("steps", args.steps), evalEvery = intFlag("eval-every", args["eval-every"]);
const warmupEpisodes = intFlag("warmup-episodes", args["warmup-episodes"]);
const evalEpisodes = intFlag("eval-episodes", args["eval-episodes"]);
const threads = intFlag("threads", args.threads);
if (threads < 1) {
  usage(`Cannot use --threads as it must be at least 1: current value is ${threads}`);
}

/** The RL jobs' overrides: `--opd-coef`, then `--extra` (validated here, before any job runs). */
const rlExtra: Record<string, unknown> = {};
if (args["opd-coef"] !== undefined) {
  const x = Number(args["opd-coef"]);
  if (!Number.isFinite(x)) {
    usage(`Cannot use --opd-coef as it must be a number: current value is ${args["opd-coef"]}`);
  }
  rlExtra.seed = { opd_coef: x };
}
/** A `--extra`-style flag's JSON object, or a usage error naming the flag. */
function extraFlag(name: string, value: string): Record<string, unknown> {
  let extra: unknown;
  try {
    extra = JSON.parse(value);
  } catch (error) {
    usage(`Cannot parse --${name} as JSON: ${(error as Error).message}`);
  }
  if (!isObject(extra)) {
    usage(`Cannot use --${name} as it must be a JSON object: current value is ${value}`);
  }
  for (const field of ["method", "random_seed", "model"]) {
    if (field in extra) {
      usage(`Cannot use --${name} as it must not set ${field} (the bench sets it per job)`);
    }
  }
  return extra;
}
if (args.extra !== undefined) {
  Object.assign(rlExtra, deepMerge(rlExtra, extraFlag("extra", args.extra)));
}
/** Every job's overrides, the warm-up's included (`--base-extra`). */
const baseExtra = args["base-extra"] === undefined
  ? {}
  : extraFlag("base-extra", args["base-extra"]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `over` merged into `base`: objects merge key by key, any other value replaces. */
function deepMerge(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Record<string, unknown>, v) : v;
  }
  return out;
}

/**
 * Per bench env: the job's env (turn limits that fit the time budget) and model. The vision
 * tasks use builtin:tiny-vl (a text-only model is refused on image observations). `search` sets
 * its own rollout and analyzer lengths: its actions run to 18 tokens and its reference analyses
 * to ~130; so does `household`: its actions run to 15 tokens with their tags and its reference
 * analyses to 184 (114 at the median), which 12 and 96 cut off.
 */
const ENV_SETTINGS: Record<string, Partial<JobSpecInput>> = {
  sokoban: { env: { id: "sokoban", max_turns: 10, history: 0 } },
  household: {
    env: { id: "household", max_turns: 15, history: 1 },
    rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 16 },
    seed: { analyzer_max_new_tokens: 192, analyzer_max_steps: 4 },
  },
  webshop: { env: { id: "webshop", max_turns: 8, history: 1 } },
  search: {
    env: { id: "search", options: { prompt: "compact" }, max_turns: 4, history: 1 },
    rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
    seed: { analyzer_max_new_tokens: 160, analyzer_max_steps: 4 },
  },
  "sokoban-image": {
    env: { id: "sokoban", max_turns: 10, history: 0, options: { render: "image" } },
    model: { base: "builtin:tiny-vl" },
  },
  ezpoints: {
    env: { id: "ezpoints", max_turns: 6, history: 0, options: { render: "image" } },
    model: { base: "builtin:tiny-vl" },
  },
  "ezpoints-text": {
    env: { id: "ezpoints", max_turns: 6, history: 0, options: { render: "text" } },
  },
};

/** Bench envs that run a `DEMO_PRESETS` entry (jobs/presets.ts), by the preset's name. */
const DEMO_ENVS: Record<string, string> = {
  "sokoban-demo": "sokoban",
  "household-demo": "household",
  "household-hard": "household-hard",
};

/**
 * The spec of bench env `name` at `seed` as the RL jobs share it, with method `sft` (the
 * warm-up job's; see `warmupSpec`).
 */
function baseSpec(name: string, seed: number): JobSpecInput {
  const common = {
    eval: { episodes: evalEpisodes, temperature: 1 },
    random_seed: seed,
    checkpoint_every: 1000,
    method: "sft",
  };
  const demo = DEMO_ENVS[name];
  if (demo !== undefined) {
    // A tuned demo preset (small-model options, long warm-up, GiGPO); `--warmup-episodes`
    // does not apply to it.
    const { method: _method, steps: _steps, eval_every: _every, ...preset } = DEMO_PRESETS[demo];
    return deepMerge({ ...preset, ...common }, baseExtra) as JobSpecInput;
  }
  return deepMerge({
    rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 12 },
    seed: { analyzer_max_new_tokens: 96, analyzer_max_steps: 4 },
    ...ENV_SETTINGS[name] ?? { env: { id: name } },
    optim: { lr: 1e-3, mini_batch_size: 64 },
    warmup: {
      policy: { episodes: warmupEpisodes, epochs: 3, lr: 3e-3 },
      analyzer: { episodes: Math.ceil((warmupEpisodes * 3) / 8), epochs: 2, lr: 2e-3 },
    },
    ...common,
  }, baseExtra) as JobSpecInput;
}

/**
 * The warm-up job of bench env `name` at `seed`. Its own step-0 evaluation is cut to one
 * test_seen episode: both RL jobs evaluate the same checkpoint at step 0 on the same tasks
 * (same `random_seed`), so a full one here would only cost time.
 */
function warmupSpec(name: string, seed: number): JobSpecInput {
  return { ...baseSpec(name, seed), eval: { episodes: 1, splits: ["test_seen"], temperature: 1 } };
}

/** The job of `arm` on bench env `name` at `seed`, from warm-up job `warmupId`. */
function rlSpec(name: string, seed: number, arm: string, warmupId: string): JobSpecInput {
  const withExtra = deepMerge(
    {
      ...baseSpec(name, seed),
      method: ARMS[arm].method,
      model: { base: `job:${warmupId}@0` },
      steps,
      eval_every: evalEvery,
    } as Record<string, unknown>,
    deepMerge({ warmup: { skip: true } }, rlExtra),
  );
  return deepMerge(withExtra, ARMS[arm].spec) as JobSpecInput;
}

// Every spec and env id is validated before the first job, so a typo costs seconds, not a warm-up.
for (const name of envNames) {
  for (const method of ["sft", ...arms]) {
    const spec = method === "sft"
      ? warmupSpec(name, seeds[0])
      : rlSpec(name, seeds[0], method, crypto.randomUUID());
    try {
      getEnvironment(parseJobSpec(spec).env.id);
    } catch (error) {
      const issues = (error as { issues?: { path: PropertyKey[]; message: string }[] }).issues;
      usage(
        `Cannot run env ${name} (${method}) as its job spec is invalid: ${
          issues?.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") ??
            (error as Error).message
        }`,
      );
    }
  }
}

/**
 * The digest of the code the warm-ups run (bench/_warmup_cache.ts), computed once: part of the
 * warm-up cache key and of the run's settings line, so that two runs' outputs can be told apart.
 * Null for `--report`, and when git cannot list the files and no `--warmup-cache` needs it.
 */
const code = args.report !== undefined ? null : await warmupCodeDigest().catch((error) => {
  if (args["warmup-cache"] !== undefined) {
    usage(`Cannot use --warmup-cache as its key needs the code's digest: ${error.message}`);
  }
  return null;
});

const rows: SeedRow[] = [];
const timings: RunTiming[] = [];
const signal: SignalRow[] = [];
const warmups: WarmupRow[] = [];
const metricLines: string[] = [];
const warmupLines: string[] = [];
/** `skills.jsonl`'s lines: live runs' libraries (bench/_learn_skills.ts), or `--report`'s files. */
const skillLines: string[] = [];
const shelf: CheckpointShelf = new Map();
const t0 = performance.now();
const pct = (x: number | undefined) => x === undefined ? "—" : `${(100 * x).toFixed(1)}%`;
await Deno.mkdir(args.out, { recursive: true });
/** The run's settings, on stderr at the start and on stdout at the end (a variant's record). */
const settings = args.report !== undefined
  ? `report of ${args.report} (baseline ${baseline})`
  : `arms ${arms.join(",")} (baseline ${baseline}); seeds ${seeds.join(",")}; ` +
    `envs ${envNames.join(",")}; steps ${steps}, ` +
    `eval every ${evalEvery}, ${evalEpisodes} evaluation episodes per split; ${threads} ` +
    `thread(s); RL overrides ${JSON.stringify(rlExtra)}; every job's overrides ` +
    `${JSON.stringify(baseExtra)}; code ${code?.slice(0, 12) ?? "unknown (git cannot list it)"}`;
console.error(`bench:learn: ${settings}`);

/**
 * Adds one RL run (live or from `metrics.jsonl`) to the report's rows; a live run also gives its
 * committed skill libraries by step (`skills`), for `skills.jsonl`.
 */
function addRun(
  run: RunInfo,
  metrics: ReadonlyMap<number, Record<string, number>>,
  skills: ReadonlyMap<number, unknown> = new Map(),
): RunTiming {
  const { rows: mine, timing } = runReport(run, metrics);
  skillLines.push(...runSkillLines(run, skills));
  rows.push(...mine);
  timings.push(timing);
  signal.push(...signalRows(run, metrics));
  for (const [step, m] of [...metrics].sort((a, b) => a[0] - b[0])) {
    metricLines.push(JSON.stringify({
      env: run.env,
      arm: run.arm,
      method: run.method,
      seed: run.seed,
      samples_per_step: run.samplesPerStep,
      episodes: run.episodes,
      step,
      metrics: m,
    }));
  }
  return timing;
}

/**
 * Adds one warm-up's row from its step-0 metrics; `codeId` (the first 12 hex digits of the code
 * digest, when known) goes to `warmup.jsonl` with it.
 */
function addWarmup(
  env: string,
  seed: number,
  step0: Record<string, number>,
  codeId: string | undefined,
): WarmupRow {
  const row = warmupRow(env, seed, step0);
  warmups.push(row);
  warmupLines.push(JSON.stringify({ env, seed, code: codeId, metrics: step0 }));
  return row;
}

if (args.report !== undefined) await loadReport(args.report.split(",").filter((d) => d !== ""));
else await runAll();

const summary = await writeOutputs();
console.log(
  [
    ...summaryTable(summary),
    ...signalSummary(signal),
    ...warmupTable(warmups),
    "",
    ...learnMermaid(summary.means, new Set(rows.map((r) => r.seed)).size),
  ].join("\n"),
);
console.log(
  `${settings}; wall ${((performance.now() - t0) / 1000).toFixed(0)} s, loadavg ${
    Deno.loadavg().map((x) => x.toFixed(1)).join(" ")
  }; outputs in ${args.out}/learn.csv, learn_diff.csv, learn_signal.csv, learn_warmup.csv, ` +
    `learn.svg, metrics.jsonl, warmup.jsonl, skills.jsonl`,
);

/** Runs every seed's warm-up and arms (see module doc). */
async function runAll(): Promise<void> {
  const handler = createSeedHandler({ engine: { threads } });
  const totalJobs = seeds.length * envNames.length * (1 + arms.length);
  let jobsDone = 0;
  const log = (msg: string) =>
    console.error(
      `[${((performance.now() - t0) / 1000).toFixed(0)}s ${++jobsDone}/${totalJobs}] ${msg}`,
    );
  for (const seed of seeds) {
    for (const envId of envNames) {
      const warm = memoryContext(warmupSpec(envId, seed), { shelf });
      const cached = await warmupFromCache(warmupSpec(envId, seed), warm.ctx.jobId);
      let step0 = cached?.metrics;
      if (!cached) {
        await handler(warm.ctx);
        step0 = warm.metrics.get(0) ?? {};
        await warmupToCache(warmupSpec(envId, seed), warm.ctx.jobId, step0);
      }
      const w = addWarmup(envId, seed, step0 ?? {}, code?.slice(0, 12)).values;
      const dir = await cacheDir(warmupSpec(envId, seed));
      log(
        `${envId} seed ${seed}: warm-up ${
          cached ? `loaded from ${cached.dir}` : dir === null ? "done" : `done, cached in ${dir}`
        }; ${w.warmup_policy_optimizer_steps ?? "—"} SFT steps, last check ${
          pct(w.warmup_policy_check_success)
        }; skill check ${pct(w.warmup_skill_check_success)} without / ${
          pct(w.warmup_skill_check_success_with_skill)
        } with, Δ lost ${w.warmup_skill_check_delta_lost?.toFixed(3) ?? "—"}`,
      );
      const runIds: string[] = [];
      for (const arm of arms) {
        const method = ARMS[arm].method;
        const run = memoryContext(rlSpec(envId, seed, arm, warm.ctx.jobId), { shelf });
        await handler(run.ctx);
        runIds.push(run.ctx.jobId);
        const { tasks_per_step: b, group_size: g } = run.ctx.spec.rollout;
        const timing = addRun(
          {
            env: envId,
            arm,
            method,
            seed,
            samplesPerStep: b * g,
            episodes: run.ctx.spec.eval.episodes,
          },
          run.metrics,
          run.skills,
        );
        const mine = rows.filter((r) => r.env === envId && r.seed === seed && r.arm === arm);
        const last = (split: string) => mine.filter((r) => r.split === split).at(-1);
        // The baseline runs first: every other arm's line adds this seed's difference at the last
        // step.
        const baseLast = (split: string) =>
          rows.findLast((r) =>
            r.env === envId && r.seed === seed && r.arm === baseline && r.split === split
          );
        const diff = (split: string) => {
          const a = last(split), b = baseLast(split);
          return a && b ? `${(100 * (a.success_rate - b.success_rate)).toFixed(1)}` : "—";
        };
        log(
          `${envId} seed ${seed} ${arm}: ${timing.secondsPerUpdate.toFixed(1)} s/update (${
            Object.entries(timing.phaseSeconds ?? {}).map(([k, v]) => `${k} ${v.toFixed(1)}`)
              .join(", ")
          }); step ${last("test_seen")?.step} test_seen ${
            pct(last("test_seen")?.success_rate)
          }, test_unseen ${pct(last("test_unseen")?.success_rate)}${
            arm !== baseline
              ? `; ${arm} − ${baseline} ${diff("test_seen")} / ${diff("test_unseen")} points`
              : ""
          }${
            timing.parseRate === null ? "" : `; analyzer parse rate ${timing.parseRate.toFixed(2)}`
          }`,
        );
        await writeOutputs();
      }
      // This seed's checkpoints are not needed again: free them before the next warm-up.
      for (const id of [warm.ctx.jobId, ...runIds]) shelf.delete(id);
    }
  }
}

/**
 * A warm-up's step-0 metrics without their timings (`seconds_*`, `*_seconds`), as JSON with sorted
 * keys: equal for the same warm-up whether trained or loaded from `--warmup-cache`.
 */
function warmupFingerprint(metrics: Record<string, number>): string {
  const kept = Object.keys(metrics).filter((k) =>
    !k.startsWith("seconds_") && !k.endsWith("_seconds")
  );
  return JSON.stringify(kept.sort().map((k) => [k, metrics[k]]));
}

/**
 * `--report`: the rows of earlier runs' output folders (their `metrics.jsonl` and
 * `warmup.jsonl`; their `skills.jsonl` lines are concatenated unchanged, in folder order), so that
 * seeds run as separate processes are summarised as one run. A run
 * (env, arm, seed) found in two folders is an error: the report would pair it twice. A warm-up
 * (env, seed) found in several folders (one per arm) is one row when they agree on everything but
 * timings ({@link warmupFingerprint}), else an error: arms from different warm-ups are no pair.
 */
async function loadReport(dirs: string[]): Promise<void> {
  if (dirs.length === 0) usage("Cannot use --report as it must name at least one folder");
  const runs = new Map<string, { info: RunInfo; metrics: Map<number, Record<string, number>> }>();
  const owner = new Map<string, string>();
  const warmups = new Map<string, { dir: string; fingerprint: string }>();
  for (const dir of dirs) {
    const text = await Deno.readTextFile(`${dir}/metrics.jsonl`).catch((error) =>
      usage(`Cannot read --report folder ${dir}: ${(error as Error).message}`)
    );
    for (const line of text.split("\n").filter((l) => l.trim() !== "")) {
      const x = JSON.parse(line);
      if (typeof x.samples_per_step !== "number" || typeof x.episodes !== "number") {
        usage(
          `Cannot use --report folder ${dir} as its metrics.jsonl lacks samples_per_step and ` +
            `episodes (written by bench:learn since --report exists)`,
        );
      }
      const k = JSON.stringify([x.env, x.arm, x.seed]);
      if (owner.has(k) && owner.get(k) !== dir) {
        usage(`Cannot use --report as run ${k} is in both ${owner.get(k)} and ${dir}`);
      }
      owner.set(k, dir);
      const run = runs.get(k) ?? {
        info: {
          env: x.env,
          arm: x.arm,
          method: x.method,
          seed: x.seed,
          samplesPerStep: x.samples_per_step,
          episodes: x.episodes,
        },
        metrics: new Map(),
      };
      run.metrics.set(x.step, x.metrics);
      runs.set(k, run);
    }
    const skills = await Deno.readTextFile(`${dir}/skills.jsonl`).catch(() => "");
    skillLines.push(...skills.split("\n").filter((l) => l.trim() !== ""));
    const warm = await Deno.readTextFile(`${dir}/warmup.jsonl`).catch(() => "");
    for (const line of warm.split("\n").filter((l) => l.trim() !== "")) {
      const x = JSON.parse(line);
      // Folders of other arms from the same warm-up (one per arm, as separate processes write
      // them) each hold it: one row per warm-up, and arms from different warm-ups are no pair.
      const k = JSON.stringify([x.env, x.seed]);
      const fingerprint = warmupFingerprint(x.metrics);
      const earlier = warmups.get(k);
      if (earlier !== undefined) {
        if (earlier.fingerprint !== fingerprint) {
          usage(
            `Cannot use --report as the warm-up of ${k} in ${dir} differs from the one in ` +
              `${earlier.dir} (another thread count or code): their arms are not paired`,
          );
        }
        continue;
      }
      warmups.set(k, { dir, fingerprint });
      addWarmup(x.env, x.seed, x.metrics, x.code);
    }
  }
  // The baseline's runs first, as a live run orders them.
  const ordered = [...runs.values()].sort((a, b) =>
    a.info.seed - b.info.seed || Number(b.info.arm === baseline) - Number(a.info.arm === baseline)
  );
  for (const { info, metrics } of ordered) addRun(info, metrics);
}

/**
 * The cache folder of warm-up `spec` under `--warmup-cache` (null without the flag): keyed by the
 * spec, the thread count and the code's digest (bench/_warmup_cache.ts `warmupCacheKey`).
 */
async function cacheDir(spec: JobSpecInput): Promise<string | null> {
  if (args["warmup-cache"] === undefined || code === null) return null;
  return `${args["warmup-cache"]}/${await warmupCacheKey(spec, { threads, code })}`;
}

/**
 * Puts a cached warm-up's step-0 files on the shelf as job `jobId`; its folder and its step-0
 * metrics (kept beside the folder as `<folder>.metrics.json`; empty when an older run cached it
 * without), or null.
 */
async function warmupFromCache(
  spec: JobSpecInput,
  jobId: string,
): Promise<{ dir: string; metrics: Record<string, number> } | null> {
  const dir = await cacheDir(spec);
  if (dir === null) return null;
  const files = new Map<string, Uint8Array>();
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isFile) files.set(entry.name, await Deno.readFile(`${dir}/${entry.name}`));
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  if (files.size === 0) return null;
  shelf.get(jobId)!.set(0, files);
  const metrics = await Deno.readTextFile(`${dir}.metrics.json`).then(JSON.parse, () => ({}));
  return { dir, metrics };
}

/**
 * Writes job `jobId`'s step-0 checkpoint to the cache (complete files only: temp then rename) and
 * its step-0 metrics beside it.
 */
async function warmupToCache(
  spec: JobSpecInput,
  jobId: string,
  metrics: Record<string, number>,
): Promise<void> {
  const dir = await cacheDir(spec);
  const files = shelf.get(jobId)?.get(0);
  if (dir === null || !files) return;
  const tmp = `${dir}.tmp-${crypto.randomUUID()}`;
  await Deno.mkdir(tmp, { recursive: true });
  for (const [name, bytes] of files) await Deno.writeFile(`${tmp}/${name}`, bytes);
  await Deno.rename(tmp, dir).catch(() => Deno.remove(tmp, { recursive: true }));
  await Deno.writeTextFile(`${dir}.metrics.json`, JSON.stringify(metrics));
}

/** Rewrites the CSVs, the JSONL files and the plot from everything measured so far; returns the summary. */
async function writeOutputs() {
  const s = summarize(rows, timings, baseline);
  await Deno.writeTextFile(`${args.out}/learn.csv`, seedCsv(rows, s.means));
  await Deno.writeTextFile(`${args.out}/learn_diff.csv`, diffCsv(s.diffs));
  await Deno.writeTextFile(
    `${args.out}/learn.svg`,
    learnPlot(s.means, new Set(rows.map((r) => r.seed)).size),
  );
  await Deno.writeTextFile(`${args.out}/learn_signal.csv`, signalCsv(signal));
  await Deno.writeTextFile(`${args.out}/metrics.jsonl`, metricLines.map((l) => `${l}\n`).join(""));
  await Deno.writeTextFile(`${args.out}/learn_warmup.csv`, warmupCsv(warmups));
  await Deno.writeTextFile(`${args.out}/warmup.jsonl`, warmupLines.map((l) => `${l}\n`).join(""));
  await Deno.writeTextFile(`${args.out}/skills.jsonl`, skillLines.map((l) => `${l}\n`).join(""));
  return s;
}
