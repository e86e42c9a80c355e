/**
 * The warm-ups of `deno task bench:learn` (pure): per (env, seed) what the warm-up job's step-0
 * metrics say about the policy every arm starts from — where the held-out check stopped it and
 * whether it reads a skill (workers/seed/README.md, "Warm-up": the skill check) — written as
 * `learn_warmup.csv` and as a Markdown table with the range over seeds.
 */
import { fix } from "./_learn_report.ts";

/** The warm-up's step-0 metrics reported, in column order (names as the trainer writes them). */
export const WARMUP_METRICS = [
  "warmup_policy_optimizer_steps",
  "warmup_policy_check_success",
  "warmup_policy_stopped_at_target",
  "warmup_skill_check_success",
  "warmup_skill_check_success_with_skill",
  "warmup_skill_check_delta_lost",
  "warmup_skill_check_lost_scored",
  "warmup_policy_seconds",
  "warmup_analyzer_seconds",
] as const;

/** One warm-up: its env, seed and the {@link WARMUP_METRICS} it wrote (absent when not written). */
export interface WarmupRow {
  env: string;
  seed: number;
  values: Partial<Record<typeof WARMUP_METRICS[number], number>>;
}

/** The warm-up row of a warm-up job from its step-0 metrics (non-finite values dropped). */
export function warmupRow(
  env: string,
  seed: number,
  step0: Readonly<Record<string, number>>,
): WarmupRow {
  const values: WarmupRow["values"] = {};
  for (const name of WARMUP_METRICS) {
    if (typeof step0[name] === "number" && Number.isFinite(step0[name])) values[name] = step0[name];
  }
  return { env, seed, values };
}

/** `learn_warmup.csv`: one row per (env, seed), one column per warm-up metric. */
export function warmupCsv(rows: readonly WarmupRow[]): string {
  return [
    ["env", "seed", ...WARMUP_METRICS].join(","),
    ...rows.map((r) =>
      [r.env, r.seed, ...WARMUP_METRICS.map((name) => fix(r.values[name], 4))].join(",")
    ),
  ].join("\n") + "\n";
}

/**
 * A policy reads skills when the reference skill lowers its own lost tokens' log-prob by more
 * than this many nats per token (`warmup_skill_check_delta_lost` below −this). Runs that ignore
 * the skill block sit within ±0.01 (bench/RESULTS.md, warm-up to a band); SEED's teacher gap
 * needs a clear negative Δ on lost tokens to push them down.
 */
export const READS_SKILL_DELTA = 0.05;

/**
 * The warm-ups as Markdown lines: per (env, seed) SFT steps, the last held-out check, the skill
 * check without / with the reference skill, Δ on lost tokens and whether that counts as reading
 * skills (Δ < −{@link READS_SKILL_DELTA} and success with the skill ≥ without); then per env the
 * range of the last check and the count of seeds that read skills.
 */
export function warmupTable(rows: readonly WarmupRow[]): string[] {
  if (rows.length === 0) return [];
  const pct = (x: number | undefined) => x === undefined ? "—" : `${fix(100 * x, 0)}%`;
  const reads = (r: WarmupRow) => {
    const d = r.values.warmup_skill_check_delta_lost;
    const without = r.values.warmup_skill_check_success;
    const withSkill = r.values.warmup_skill_check_success_with_skill;
    if (d === undefined || without === undefined || withSkill === undefined) return undefined;
    return d < -READS_SKILL_DELTA && withSkill >= without;
  };
  const out = [
    "",
    "| env | seed | SFT steps | last held-out check | skill check without / with skill | Δ lost (nats/token) | reads skills |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const v = r.values;
    const read = reads(r);
    out.push(
      `| ${r.env} | ${r.seed} | ${fix(v.warmup_policy_optimizer_steps, 0, "—")} | ${
        pct(v.warmup_policy_check_success)
      } | ${pct(v.warmup_skill_check_success)} / ${
        pct(v.warmup_skill_check_success_with_skill)
      } | ${fix(v.warmup_skill_check_delta_lost, 3, "—")} | ${
        read === undefined ? "—" : read ? "yes" : "no"
      } |`,
    );
  }
  out.push("");
  for (const env of new Set(rows.map((r) => r.env))) {
    const mine = rows.filter((r) => r.env === env);
    const checks = mine.map((r) => r.values.warmup_policy_check_success).filter((x) =>
      x !== undefined
    );
    const range = checks.length
      ? `last held-out check ${pct(Math.min(...checks))}–${pct(Math.max(...checks))}`
      : "no held-out checks";
    out.push(
      `${env} warm-ups: ${range} over ${mine.length} seed(s); reads skills on ${
        mine.filter((r) => reads(r) === true).length
      } of ${mine.length}`,
    );
  }
  return out;
}
