/**
 * Summaries of `deno task bench:learn` over seeds (pure; statistics in bench/_learn_stats.ts):
 * per (env, method, step, split) the mean success over seeds with a 95% t-interval, the paired
 * difference SEED − GRPO per (env, step, split), the samples SEED needs to reach GRPO's final
 * mean success, seconds per update, and the CSV and table text written from them.
 */
import {
  type Interval,
  mean,
  pairedDifference,
  samplesToReach,
  tInterval,
  wilsonInterval,
} from "./_learn_stats.ts";

/** One evaluation of one run: a seed's `method` job on `env`, at update `step`. */
export interface SeedRow {
  env: string;
  /** `grpo` or `seed`. */
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
  method: string;
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

/** Mean over seeds of one (env, method, step, split). */
export interface MeanRow {
  env: string;
  method: string;
  step: number;
  samples: number;
  split: string;
  success: Interval;
  score: number;
}

/** Paired difference SEED − GRPO of one (env, step, split), over seeds that ran both. */
export interface DiffRow {
  env: string;
  step: number;
  samples: number;
  split: string;
  diff: Interval;
}

/** Samples SEED needs to reach GRPO's final mean success on one (env, split). */
export interface ReachRow {
  env: string;
  split: string;
  grpoFinal: number;
  /** GRPO's samples at its final evaluation. */
  grpoSamples: number;
  /** null: SEED's mean curve never reached it ("not reached"). */
  seedSamples: number | null;
}

/** Per (env, method): seconds per update over seeds. */
export interface TimingRow {
  env: string;
  method: string;
  secondsPerUpdate: Interval;
  /** Per phase: the mean over seeds of the runs' mean seconds per update (runs that split it). */
  phaseSeconds: Record<string, number>;
  /** Mean over seeds of the runs' parse rates; null when none analysed. */
  parseRate: number | null;
}

/** Everything printed and written at the end of a run (or after each job, for a partial run). */
export interface LearnSummary {
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

/** Aggregates per-seed rows and timings (see module doc); order follows first appearance. */
export function summarize(rows: readonly SeedRow[], timings: readonly RunTiming[]): LearnSummary {
  const means: MeanRow[] = [];
  for (const g of groupBy(rows, (r) => key(r.env, r.method, r.step, r.split)).values()) {
    means.push({
      env: g[0].env,
      method: g[0].method,
      step: g[0].step,
      samples: g[0].samples,
      split: g[0].split,
      success: tInterval(g.map((r) => r.success_rate)),
      score: mean(g.map((r) => r.score)),
    });
  }
  const diffs: DiffRow[] = [];
  for (const g of groupBy(rows, (r) => key(r.env, r.step, r.split)).values()) {
    const bySeed = (method: string) =>
      new Map(g.filter((r) => r.method === method).map((r) => [r.seed, r.success_rate]));
    const diff = pairedDifference(bySeed("seed"), bySeed("grpo"));
    if (diff.n === 0) continue;
    diffs.push({ env: g[0].env, step: g[0].step, samples: g[0].samples, split: g[0].split, diff });
  }
  const reach: ReachRow[] = [];
  for (const g of groupBy(means, (m) => key(m.env, m.split)).values()) {
    const grpo = g.filter((m) => m.method === "grpo").sort((a, b) => a.step - b.step);
    const seed = g.filter((m) => m.method === "seed");
    if (!grpo.length || !seed.length) continue;
    const final = grpo.at(-1)!;
    reach.push({
      env: final.env,
      split: final.split,
      grpoFinal: final.success.mean,
      grpoSamples: final.samples,
      seedSamples: samplesToReach(
        seed.map((m) => ({ samples: m.samples, value: m.success.mean })),
        final.success.mean,
      ),
    });
  }
  const timing: TimingRow[] = [];
  for (const g of groupBy(timings, (t) => key(t.env, t.method)).values()) {
    const rates = g.map((t) => t.parseRate).filter((p): p is number => p !== null);
    const split = g.map((t) => t.phaseSeconds).filter((p) => p !== undefined);
    const phases = [...new Set(split.flatMap((p) => Object.keys(p)))];
    timing.push({
      env: g[0].env,
      method: g[0].method,
      secondsPerUpdate: tInterval(g.map((t) => t.secondsPerUpdate)),
      phaseSeconds: Object.fromEntries(
        phases.map((ph) => [ph, mean(split.map((p) => p[ph] ?? 0))]),
      ),
      parseRate: rates.length ? mean(rates) : null,
    });
  }
  return { means, diffs, reach, timing };
}

/** Number as CSV/table text: fixed `digits`, empty (CSV) or `n/a` (table) when not finite. */
export const fix = (x: number | undefined, digits: number, missing = ""): string =>
  x !== undefined && Number.isFinite(x) ? x.toFixed(digits) : missing;

/**
 * `learn.csv`: one row per (env, method, seed, step, split) with that seed's Wilson 95% interval
 * over its evaluation episodes (`ci_kind` wilson_binomial, `n` = episodes), then rows with
 * `seed` = `mean`: the mean over seeds with the 95% t-interval over seeds (`ci_kind`
 * t_over_seeds, `n` = seeds).
 */
export function seedCsv(rows: readonly SeedRow[], means: readonly MeanRow[]): string {
  const header = "env,method,seed,step,samples,split,success_rate,score,n,ci_low,ci_high,ci_kind";
  const perSeed = rows.map((r) => {
    const [lo, hi] = wilsonInterval(Math.round(r.success_rate * r.episodes), r.episodes);
    return [
      r.env,
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
      m.method,
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

/** `learn_diff.csv`: the paired difference SEED − GRPO per (env, step, split) with its t-interval. */
export function diffCsv(diffs: readonly DiffRow[]): string {
  const header = "env,step,samples,split,n_seeds,seed_minus_grpo,ci_low,ci_high";
  return [
    header,
    ...diffs.map((d) =>
      [
        d.env,
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
 * SEED's alone; rescore holds its teacher pass, shown under its phase). The runs are sequential, so on a loaded machine the phases both do (rollout, the old
 * and reference passes, the RL update) move between them too; the last line compares inside the
 * SEED run alone: its seconds per update over the same run without SEED's own work (analyze,
 * teacher pass), the GRPO-equivalent cost at the same moment.
 */
export function phaseTable(
  grpo: Readonly<Record<string, number>>,
  seed: Readonly<Record<string, number>>,
  env: string,
): string[] {
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
    "| env | phase | GRPO s/update | SEED s/update | SEED − GRPO | SEED ÷ GRPO |",
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
    `${env}: SEED's own work (analyze + teacher pass) ${fix(own, 2)} s of ${
      fix(all, 2)
    } s per update; inside the SEED run, SEED ÷ (the same updates without it) ${
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
  const out = [
    `Mean success over ${seeds} seed(s), ± = half-width of the 95% t-interval over seeds ` +
    `(each seed's own binomial 95% interval over its evaluation episodes is separate: ` +
    `learn.csv, ci_kind wilson_binomial). SEED − GRPO is paired by seed (same warm-up, same ` +
    `evaluation tasks), in points.`,
    "",
    "| env | split | step | samples | GRPO | SEED | SEED − GRPO [95% interval] |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  const find = (env: string, method: string, step: number, split: string) =>
    s.means.find((m) =>
      m.env === env && m.method === method && m.step === step && m.split === split
    )?.success;
  const envOrder = [...new Set(s.diffs.map((d) => d.env))];
  const ordered = [...s.diffs].sort((a, b) =>
    envOrder.indexOf(a.env) - envOrder.indexOf(b.env) || a.split.localeCompare(b.split) ||
    a.step - b.step
  );
  for (const d of ordered) {
    const diff = `${fix(100 * d.diff.mean, 1, "n/a")} [${fix(100 * d.diff.low, 1, "n/a")}, ${
      fix(100 * d.diff.high, 1, "n/a")
    }]`;
    out.push(
      `| ${d.env} | ${d.split} | ${d.step} | ${d.samples} | ${
        pct(find(d.env, "grpo", d.step, d.split))
      } | ${pct(find(d.env, "seed", d.step, d.split))} | ${diff} |`,
    );
  }
  out.push("");
  for (const r of s.reach) {
    const reached = r.seedSamples === null
      ? `not reached within ${r.grpoSamples} samples`
      : r.seedSamples === 0
      ? `0 samples (already at step 0, the shared warm-up)`
      : `${Math.round(r.seedSamples)} samples (${
        fix((100 * r.seedSamples) / r.grpoSamples, 0, "n/a")
      }% of GRPO's ${r.grpoSamples})`;
    out.push(
      `${r.env} ${r.split}: SEED reaches GRPO's final ${
        fix(100 * r.grpoFinal, 1)
      }% (mean curve, interpolated) at ${reached}`,
    );
  }
  for (const env of new Set(s.timing.map((t) => t.env))) {
    const g = s.timing.find((t) => t.env === env && t.method === "grpo");
    const e = s.timing.find((t) => t.env === env && t.method === "seed");
    if (!g || !e) continue;
    const sec = (i: Interval) => `${fix(i.mean, 2)} s ±${fix(i.half, 2, "n/a")}`;
    out.push(
      `${env}: seconds per update GRPO ${sec(g.secondsPerUpdate)}, SEED ${
        sec(e.secondsPerUpdate)
      } (ratio of means SEED ÷ GRPO ${
        fix(e.secondsPerUpdate.mean / g.secondsPerUpdate.mean, 2)
      }); SEED analyzer parse rate ${e.parseRate === null ? "—" : fix(e.parseRate, 2)}`,
    );
    if (Object.keys(e.phaseSeconds).length > 0) {
      out.push(...phaseTable(g.phaseSeconds, e.phaseSeconds, env));
    }
  }
  return out;
}
