/**
 * SEED's signal per update in `deno task bench:learn` (pure): the per-step signal metrics of each
 * run of a SEED-method arm (`seed`, `seed-gigpo`, `seed-oracle`) (workers/seed/signal_metrics.ts,
 * plus the analyzer parse rate), written as `learn_signal.csv`, and the lines that check them
 * against SEED's per-update targets — mean Δ on won
 * trajectories' tokens ≥ +0.1 nats and corr(Δ, A) > 0 at every step, ≥ 99% of analyses parsed,
 * and skill well-formedness / truthfulness at the last step.
 */
import { fix } from "./_learn_report.ts";
import { type Interval, tInterval } from "./_learn_stats.ts";

/** The step metrics reported, in column order (names as the trainer writes them). */
export const SIGNAL_METRICS = [
  "teacher_gap_won_mean",
  "teacher_gap_lost_mean",
  "old_logprob_won_mean",
  "teacher_gap_advantage_corr",
  "zero_advantage_group_share",
  "analyzer_parse_rate",
  "skill_well_formed_rate",
  "skill_truthful_rate",
  "skill_truthful_won_rate",
  "skill_truthful_lost_rate",
  "all_fail_group_share",
  "step_skill_samples",
  "teacher_gap_step_mean",
  // Last, so the earlier columns keep their places in files written before it.
  "skill_reference_match_rate",
] as const;

/** One metric name of {@link SIGNAL_METRICS}. */
export type SignalMetric = typeof SIGNAL_METRICS[number];

/** The signal metrics of one update (`step` ≥ 1) of one run; a metric the step lacks is absent. */
export interface SignalRow {
  env: string;
  /** The bench arm (bench/_learn_arms.ts). */
  arm: string;
  /** The arm's JobSpec method. */
  method: string;
  seed: number;
  step: number;
  values: Partial<Record<SignalMetric, number>>;
}

/** The signal rows of one run from its metrics by step (steps ≥ 1; step 0 has no update). */
export function signalRows(
  run: { env: string; arm: string; method: string; seed: number },
  metrics: ReadonlyMap<number, Record<string, number>>,
): SignalRow[] {
  const out: SignalRow[] = [];
  for (const [step, m] of [...metrics].sort((a, b) => a[0] - b[0])) {
    if (step < 1) continue;
    const values: Partial<Record<SignalMetric, number>> = {};
    for (const name of SIGNAL_METRICS) {
      if (typeof m[name] === "number" && Number.isFinite(m[name])) values[name] = m[name];
    }
    if (Object.keys(values).length > 0) out.push({ ...run, step, values });
  }
  return out;
}

/** `learn_signal.csv`: one row per (env, arm, seed, step), one column per signal metric. */
export function signalCsv(rows: readonly SignalRow[]): string {
  const header = ["env", "arm", "method", "seed", "step", ...SIGNAL_METRICS].join(",");
  return [
    header,
    ...rows.map((r) =>
      [
        r.env,
        r.arm,
        r.method,
        r.seed,
        r.step,
        ...SIGNAL_METRICS.map((k) => fix(r.values[k], 4, "")),
      ].join(",")
    ),
  ].join("\n") + "\n";
}

/** Per env: each metric's per-seed mean over steps, as a t-interval over seeds. */
function perSeedMeans(rows: readonly SignalRow[], metric: SignalMetric): Interval | null {
  const bySeed = new Map<number, number[]>();
  for (const r of rows) {
    const v = r.values[metric];
    if (v === undefined) continue;
    bySeed.set(r.seed, [...bySeed.get(r.seed) ?? [], v]);
  }
  const means = [...bySeed.values()].map((xs) => xs.reduce((a, b) => a + b, 0) / xs.length);
  return means.length > 0 ? tInterval(means) : null;
}

/**
 * The signal report as text lines, per (env, arm) of the SEED-method runs: for each metric the mean
 * over steps (per seed, then the mean over seeds ± the 95% t-interval's half-width), the share of
 * steps that meet the per-step targets, and the last step's skill quality.
 */
export function signalSummary(rows: readonly SignalRow[]): string[] {
  const out: string[] = [];
  const seedRows = rows.filter((r) => r.method === "seed");
  const runs = new Map(seedRows.map((r) => [`${r.env}\u0000${r.arm}`, r]));
  for (const { env, arm } of runs.values()) {
    const mine = seedRows.filter((r) => r.env === env && r.arm === arm);
    const label = `${env} ${arm === "seed" ? "SEED" : arm}`;
    const parts = SIGNAL_METRICS.map((k) => {
      const i = perSeedMeans(mine, k);
      return i === null ? null : `${k} ${fix(i.mean, 3)} ±${fix(i.half, 3, "n/a")}`;
    }).filter((p) => p !== null);
    out.push(`${label} signal, mean over steps then seeds: ${parts.join("; ")}`);
    const share = (test: (r: SignalRow) => boolean | null) => {
      const judged = mine.map(test).filter((x) => x !== null);
      return judged.length === 0 ? "—" : `${judged.filter(Boolean).length}/${judged.length} steps`;
    };
    const won = share((r) =>
      r.values.teacher_gap_won_mean === undefined ? null : r.values.teacher_gap_won_mean >= 0.1
    );
    const corr = share((r) =>
      r.values.teacher_gap_advantage_corr === undefined
        ? null
        : r.values.teacher_gap_advantage_corr > 0
    );
    const parsed = share((r) =>
      r.values.analyzer_parse_rate === undefined ? null : r.values.analyzer_parse_rate >= 0.99
    );
    const lastStep = Math.max(...mine.map((r) => r.step));
    const last = mine.filter((r) => r.step === lastStep);
    const lastMean = (k: SignalMetric) => {
      const xs = last.map((r) => r.values[k]).filter((v) => v !== undefined);
      return xs.length ? fix(xs.reduce((a, b) => a + b, 0) / xs.length, 2) : "—";
    };
    out.push(
      `${label} targets: Δ won ≥ 0.1 at ${won}; corr(Δ, A) > 0 at ${corr}; parse ≥ 0.99 at ${parsed}; ` +
        `step ${lastStep} (mean over ${last.length} seed(s)): well-formed ${
          lastMean("skill_well_formed_rate")
        }, truthful ${lastMean("skill_truthful_rate")} (won ${
          lastMean("skill_truthful_won_rate")
        }, lost ${lastMean("skill_truthful_lost_rate")}), reference match ${
          lastMean("skill_reference_match_rate")
        }`,
    );
  }
  return out;
}
