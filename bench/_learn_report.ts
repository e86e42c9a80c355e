/**
 * Summaries of `deno task bench:learn` over seeds (pure; statistics in bench/_learn_stats.ts):
 * per (env, arm, step, split) the mean success over seeds with a 95% t-interval, the paired
 * difference arm − baseline per (env, arm, step, split) for every arm but the baseline
 * (`--baseline`, default `grpo`), the samples each arm needs to reach the baseline's final mean
 * success, seconds per update, and the CSV and table text written from them.
 */
import {
  type Interval,
  mean,
  pairedDifference,
  samplesToReach,
  tInterval,
  wilsonInterval,
} from "./_learn_stats.ts";

/** One evaluation of one run: a seed's `arm` job on `env`, at update `step`. */
export interface SeedRow {
  env: string;
  /** The arm (bench/_learn_arms.ts: `grpo`, `gigpo`, `seed`, `seed-gigpo`, `seed-oracle`). */
  arm: string;
  /** The arm's JobSpec method. */
  method: string;
  /** The jobs' `random_seed` (the warm-up's too). */
  seed: number;
  step: number;
  /** Episodes sampled for training up to `step`: step × B × G. */
  samples: number;
  split: string;
  /** Share of the `episodes` evaluation episodes won, in [0, 1]. */
  success_rate: number;
  /** Mean episode score (env units). */
  score: number;
  /** Evaluation episodes behind `success_rate`. */
  episodes: number;
}

/**
 * One RL run's cost: mean `step_seconds` per update (rollout, analyze, rescore, advantage and
 * update phases; evaluations excluded), its split by phase and the analyzer parse rate.
 */
export interface RunTiming {
  env: string;
  arm: string;
  seed: number;
  secondsPerUpdate: number;
  /**
   * Mean seconds per update of each phase, by name (`seconds_<phase>` of the step metrics without
   * the prefix, `eval` excluded; they add up to `secondsPerUpdate`), and of SEED's own work inside
   * one of them ({@link SEED_PARTS}: `teacher_pass`, from the step metric
   * `teacher_pass_seconds`). Absent: not split.
   */
  phaseSeconds?: Readonly<Record<string, number>>;
  /** Mean analyzer parse rate over updates; null when nothing was analysed (GRPO). */
  parseRate: number | null;
}

/** Mean over seeds of one (env, arm, step, split). */
export interface MeanRow {
  env: string;
  arm: string;
  step: number;
  samples: number;
  split: string;
  success: Interval;
  score: number;
}

/** Paired difference arm − baseline of one (env, step, split), over seeds that ran both. */
export interface DiffRow {
  env: string;
  arm: string;
  baseline: string;
  step: number;
  samples: number;
  split: string;
  diff: Interval;
}

/** Samples `arm` needs to reach the baseline's final mean success on one (env, split). */
export interface ReachRow {
  env: string;
  split: string;
  arm: string;
  baseline: string;
  baselineFinal: number;
  /** The baseline's samples at its final evaluation. */
  baselineSamples: number;
  /** null: the arm's mean curve never reached it ("not reached"). */
  armSamples: number | null;
}

/** Per (env, arm): seconds per update over seeds. */
export interface TimingRow {
  env: string;
  arm: string;
  secondsPerUpdate: Interval;
  /** Per phase: the mean over seeds of the runs' mean seconds per update (runs that split it). */
  phaseSeconds: Record<string, number>;
  /** Mean over seeds of the runs' parse rates; null when none analysed. */
  parseRate: number | null;
}

/** Everything printed and written at the end of a run (or after each job, for a partial run). */
export interface LearnSummary {
  /** The arm the differences are taken from. */
  baseline: string;
  /** Arms in order of first appearance. */
  arms: string[];
  means: MeanRow[];
  diffs: DiffRow[];
  reach: ReachRow[];
  timing: TimingRow[];
}

const key = (...parts: (string | number)[]) => parts.join("\u0000");

function groupBy<T>(items: readonly T[], keyOf: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/**
 * Aggregates per-seed rows and timings (see module doc); order follows first appearance.
 * `baseline` (default `grpo`) is the arm the paired differences and samples-to-reach compare with.
 */
export function summarize(
  rows: readonly SeedRow[],
  timings: readonly RunTiming[],
  baseline = "grpo",
): LearnSummary {
  const arms = [...new Set([...rows.map((r) => r.arm), ...timings.map((t) => t.arm)])];
  const means: MeanRow[] = [];
  for (const g of groupBy(rows, (r) => key(r.env, r.arm, r.step, r.split)).values()) {
    means.push({
      env: g[0].env,
      arm: g[0].arm,
      step: g[0].step,
      samples: g[0].samples,
      split: g[0].split,
      success: tInterval(g.map((r) => r.success_rate)),
      score: mean(g.map((r) => r.score)),
    });
  }
  const others = arms.filter((a) => a !== baseline);
  const diffs: DiffRow[] = [];
  for (const g of groupBy(rows, (r) => key(r.env, r.step, r.split)).values()) {
    const bySeed = (arm: string) =>
      new Map(g.filter((r) => r.arm === arm).map((r) => [r.seed, r.success_rate]));
    for (const arm of others) {
      const diff = pairedDifference(bySeed(arm), bySeed(baseline));
      if (diff.n === 0) continue;
      const { env, step, samples, split } = g[0];
      diffs.push({ env, arm, baseline, step, samples, split, diff });
    }
  }
  const reach: ReachRow[] = [];
  for (const g of groupBy(means, (m) => key(m.env, m.split)).values()) {
    const base = g.filter((m) => m.arm === baseline).sort((a, b) => a.step - b.step);
    if (!base.length) continue;
    const final = base.at(-1)!;
    for (const arm of others) {
      const curve = g.filter((m) => m.arm === arm);
      if (!curve.length) continue;
      reach.push({
        env: final.env,
        split: final.split,
        arm,
        baseline,
        baselineFinal: final.success.mean,
        baselineSamples: final.samples,
        armSamples: samplesToReach(
          curve.map((m) => ({ samples: m.samples, value: m.success.mean })),
          final.success.mean,
        ),
      });
    }
  }
  const timing: TimingRow[] = [];
  for (const g of groupBy(timings, (t) => key(t.env, t.arm)).values()) {
    const rates = g.map((t) => t.parseRate).filter((p): p is number => p !== null);
    const split = g.map((t) => t.phaseSeconds).filter((p) => p !== undefined);
    const phases = [...new Set(split.flatMap((p) => Object.keys(p)))];
    timing.push({
      env: g[0].env,
      arm: g[0].arm,
      secondsPerUpdate: tInterval(g.map((t) => t.secondsPerUpdate)),
      phaseSeconds: Object.fromEntries(
        phases.map((ph) => [ph, mean(split.map((p) => p[ph] ?? 0))]),
      ),
      parseRate: rates.length ? mean(rates) : null,
    });
  }
  return { baseline, arms, means, diffs, reach, timing };
}

/** Number as CSV/table text: fixed `digits`, empty (CSV) or `n/a` (table) when not finite. */
export const fix = (x: number | undefined, digits: number, missing = ""): string =>
  x !== undefined && Number.isFinite(x) ? x.toFixed(digits) : missing;

/**
 * `learn.csv`: one row per (env, arm, seed, step, split) with that seed's Wilson 95% interval
 * over its evaluation episodes (`ci_kind` wilson_binomial, `n` = episodes), then rows with
 * `seed` = `mean`: the mean over seeds with the 95% t-interval over seeds (`ci_kind`
 * t_over_seeds, `n` = seeds).
 */
export function seedCsv(rows: readonly SeedRow[], means: readonly MeanRow[]): string {
  const header =
    "env,arm,method,seed,step,samples,split,success_rate,score,n,ci_low,ci_high,ci_kind";
  const methodOf = new Map(rows.map((r) => [r.arm, r.method]));
  const perSeed = rows.map((r) => {
    const [lo, hi] = wilsonInterval(Math.round(r.success_rate * r.episodes), r.episodes);
    return [
      r.env,
      r.arm,
      r.method,
      r.seed,
      r.step,
      r.samples,
      r.split,
      r.success_rate,
      r.score,
      r.episodes,
      fix(lo, 4),
      fix(hi, 4),
      "wilson_binomial",
    ].join(",");
  });
  const meanRows = means.map((m) =>
    [
      m.env,
      m.arm,
      methodOf.get(m.arm) ?? "",
      "mean",
      m.step,
      m.samples,
      m.split,
      fix(m.success.mean, 4),
      fix(m.score, 4),
      m.success.n,
      fix(m.success.low, 4),
      fix(m.success.high, 4),
      "t_over_seeds",
    ].join(",")
  );
  return [header, ...perSeed, ...meanRows].join("\n") + "\n";
}

/**
 * `learn_diff.csv`: the paired difference arm − baseline per (env, arm, step, split) with its
 * t-interval over seeds (`diff`, success rate in [−1, 1]).
 */
export function diffCsv(diffs: readonly DiffRow[]): string {
  const header = "env,arm,baseline,step,samples,split,n_seeds,diff,ci_low,ci_high";
  return [
    header,
    ...diffs.map((d) =>
      [
        d.env,
        d.arm,
        d.baseline,
        d.step,
        d.samples,
        d.split,
        d.diff.n,
        fix(d.diff.mean, 4),
        fix(d.diff.low, 4),
        fix(d.diff.high, 4),
      ].join(",")
    ),
  ].join("\n") + "\n";
}

/** SEED's own work inside a phase (a `phaseSeconds` key) → the phase that holds it. */
export const SEED_PARTS: Readonly<Record<string, string>> = {
  teacher_pass: "rescore",
};

/**
 * Seconds per update by phase, GRPO beside SEED (means over seeds), as Markdown lines, then the
 * SEED run's own split. SEED − GRPO per phase says where SEED's extra time goes (analyze is
 * SEED's alone; rescore holds its teacher pass, shown under its phase). The runs are sequential, so
 * on a loaded machine the phases both do (rollout, the old and reference passes, the RL update)
 * move between them too; the last line compares inside the SEED run alone: its seconds per update
 * over the same run without SEED's own work (analyze, teacher pass), the GRPO-equivalent cost at
 * the same moment.
 */
export function phaseTable(
  grpo: Readonly<Record<string, number>>,
  seed: Readonly<Record<string, number>>,
  env: string,
  labels: { base: string; arm: string } = { base: "GRPO", arm: "SEED" },
): string[] {
  const { base: B, arm: A } = labels;
  const names = [...new Set([...Object.keys(grpo), ...Object.keys(seed)])];
  const phases = names.filter((n) => !(n in SEED_PARTS));
  const total = (p: Readonly<Record<string, number>>) =>
    phases.reduce((n, ph) => n + (p[ph] ?? 0), 0);
  // GRPO has no share of SEED's own work (a part's GRPO seconds are ~0): no ratio for parts.
  const row = (name: string, a: number, b: number, ratio = true) =>
    `| ${env} | ${name} | ${fix(a, 2)} | ${fix(b, 2)} | ${fix(b - a, 2)} | ${
      fix(ratio && a > 0 ? b / a : NaN, 2, "n/a")
    } |`;
  const lines = [
    "",
    `| env | phase | ${B} s/update | ${A} s/update | ${A} − ${B} | ${A} ÷ ${B} |`,
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const ph of phases) {
    lines.push(row(ph, grpo[ph] ?? 0, seed[ph] ?? 0));
    for (const [part, of] of Object.entries(SEED_PARTS)) {
      if (of === ph && part in seed) {
        lines.push(row(`${ph}: ${part.replace("_", " ")}`, grpo[part] ?? 0, seed[part], false));
      }
    }
  }
  lines.push(row("total", total(grpo), total(seed)));
  const own = (seed.analyze ?? 0) + (seed.teacher_pass ?? 0);
  const all = total(seed);
  lines.push(
    "",
    `${env}: ${A}'s own work (analyze + teacher pass) ${fix(own, 2)} s of ${
      fix(all, 2)
    } s per update; inside the ${A} run, ${A} ÷ (the same updates without it) ${
      fix(all > own ? all / (all - own) : NaN, 2, "n/a")
    }`,
  );
  return lines;
}

/** Success as a percentage with its half-width: `31.3% ±4.2` (`±n/a` with one seed). */
const pct = (i: Interval | undefined) =>
  i ? `${fix(100 * i.mean, 1, "n/a")}% ±${fix(100 * i.half, 1, "n/a")}` : "—";

/** The final report as Markdown lines (tables, then samples-to-reach and timing lines). */
export function summaryTable(s: LearnSummary): string[] {
  const seeds = Math.max(0, ...s.means.map((m) => m.success.n));
  const B = s.baseline;
  const others = s.arms.filter((a) => a !== B);
  const out = [
    `Mean success over ${seeds} seed(s), ± = half-width of the 95% t-interval over seeds ` +
    `(each seed's own binomial 95% interval over its evaluation episodes is separate: ` +
    `learn.csv, ci_kind wilson_binomial). arm − ${B} is paired by seed (same warm-up, same ` +
    `evaluation tasks), in points.`,
    "",
    `| env | split | step | samples | ${s.arms.join(" | ")} | ${
      others.map((a) => `${a} − ${B} [95% interval]`).join(" | ")
    } |`,
    `|${" --- |".repeat(4 + s.arms.length + others.length)}`,
  ];
  const find = (env: string, arm: string, step: number, split: string) =>
    s.means.find((m) => m.env === env && m.arm === arm && m.step === step && m.split === split)
      ?.success;
  const diffOf = (env: string, arm: string, step: number, split: string) => {
    const d = s.diffs.find((d) =>
      d.env === env && d.arm === arm && d.step === step && d.split === split
    )?.diff;
    return d
      ? `${fix(100 * d.mean, 1, "n/a")} [${fix(100 * d.low, 1, "n/a")}, ${
        fix(100 * d.high, 1, "n/a")
      }]`
      : "—";
  };
  const envOrder = [...new Set(s.means.map((m) => m.env))];
  const cells = [...new Map(s.means.map((m) => [key(m.env, m.split, m.step), m])).values()]
    .sort((a, b) =>
      envOrder.indexOf(a.env) - envOrder.indexOf(b.env) || a.split.localeCompare(b.split) ||
      a.step - b.step
    );
  for (const c of cells) {
    out.push(
      `| ${c.env} | ${c.split} | ${c.step} | ${c.samples} | ${
        s.arms.map((a) => pct(find(c.env, a, c.step, c.split))).join(" | ")
      } | ${others.map((a) => diffOf(c.env, a, c.step, c.split)).join(" | ")} |`,
    );
  }
  out.push("");
  for (const r of s.reach) {
    const target = `${r.baseline}'s final ${
      fix(100 * r.baselineFinal, 1)
    }% (mean curve, interpolated)`;
    if (r.armSamples === null) {
      out.push(
        `${r.env} ${r.split}: ${r.arm} does not reach ${target} within ${r.baselineSamples} samples`,
      );
      continue;
    }
    const reached = r.armSamples === 0
      ? `0 samples (already at step 0, the shared warm-up)`
      : `${Math.round(r.armSamples)} samples (${
        fix((100 * r.armSamples) / r.baselineSamples, 0, "n/a")
      }% of ${r.baseline}'s ${r.baselineSamples})`;
    out.push(`${r.env} ${r.split}: ${r.arm} reaches ${target} at ${reached}`);
  }
  const sec = (i: Interval) => `${fix(i.mean, 2)} s ±${fix(i.half, 2, "n/a")}`;
  for (const env of new Set(s.timing.map((t) => t.env))) {
    const mine = s.timing.filter((t) => t.env === env);
    const base = mine.find((t) => t.arm === B);
    out.push(
      `${env}: seconds per update ${
        mine.map((t) =>
          `${t.arm} ${sec(t.secondsPerUpdate)}${
            base && t !== base
              ? ` (÷ ${B} ${fix(t.secondsPerUpdate.mean / base.secondsPerUpdate.mean, 2)})`
              : ""
          }${t.parseRate === null ? "" : `, analyzer parse rate ${fix(t.parseRate, 2)}`}`
        ).join("; ")
      }`,
    );
    if (!base) continue;
    for (const t of mine) {
      if (t === base || !("analyze" in t.phaseSeconds)) continue;
      out.push(...phaseTable(base.phaseSeconds, t.phaseSeconds, env, { base: B, arm: t.arm }));
    }
  }
  return out;
}

/** Which RL run a metrics map belongs to, and the sizes its rows need. */
export interface RunInfo {
  env: string;
  arm: string;
  method: string;
  seed: number;
  /** Training episodes per update: B × G. */
  samplesPerStep: number;
  /** Evaluation episodes per split. */
  episodes: number;
}

/**
 * One RL run's evaluation rows (one per step and split with `eval/<split>/success_rate`) and its
 * timing (mean `step_seconds` over updates ≥ 1, per-phase means from `seconds_<phase>` without
 * `seconds_eval` and from {@link SEED_PARTS}' `<part>_seconds`, mean `analyzer_parse_rate`), from
 * its metrics by step. Used on a live run and on `metrics.jsonl` lines alike (`--report`).
 */
export function runReport(
  run: RunInfo,
  metrics: ReadonlyMap<number, Readonly<Record<string, number>>>,
): { rows: SeedRow[]; timing: RunTiming } {
  const stepSeconds: number[] = [], parseRates: number[] = [];
  const phaseSums: Record<string, number> = {};
  const rows: SeedRow[] = [];
  for (const [step, m] of [...metrics].sort((a, b) => a[0] - b[0])) {
    if (step > 0 && typeof m.step_seconds === "number") {
      stepSeconds.push(m.step_seconds);
      for (const [k, v] of Object.entries(m)) {
        const phase = k.startsWith("seconds_") && k !== "seconds_eval"
          ? k.slice("seconds_".length)
          : k.endsWith("_seconds") && k.slice(0, -"_seconds".length) in SEED_PARTS
          ? k.slice(0, -"_seconds".length)
          : null;
        if (phase !== null) phaseSums[phase] = (phaseSums[phase] ?? 0) + v;
      }
    }
    if (step > 0 && typeof m.analyzer_parse_rate === "number") {
      parseRates.push(m.analyzer_parse_rate);
    }
    for (const split of ["test_seen", "test_unseen"]) {
      const sr = m[`eval/${split}/success_rate`];
      if (sr === undefined) continue;
      rows.push({
        env: run.env,
        arm: run.arm,
        method: run.method,
        seed: run.seed,
        step,
        samples: step * run.samplesPerStep,
        split,
        success_rate: sr,
        score: m[`eval/${split}/score`],
        episodes: run.episodes,
      });
    }
  }
  const updates = Math.max(1, stepSeconds.length);
  return {
    rows,
    timing: {
      env: run.env,
      arm: run.arm,
      seed: run.seed,
      secondsPerUpdate: stepSeconds.reduce((a, b) => a + b, 0) / updates,
      phaseSeconds: Object.fromEntries(
        Object.entries(phaseSums).map(([k, v]) => [k, v / updates]),
      ),
      parseRate: parseRates.length ? mean(parseRates) : null,
    },
  };
}
