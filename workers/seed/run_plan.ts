/**
 * What a job's method means for its run, derived once from the spec, so that no other file
 * tests `spec.method`:
 * - `seed`: warm up the policy and the analyzer, then RL updates with analysis, teacher
 *   re-scoring and λ_opd = `seed.opd_coef` (with `seed.analyze: "none"` it is GRPO: no analysis,
 *   no analyzer warm-up, λ_opd = 0);
 *   With `seed.skill_source: "reference"` the environment's reference analyzer writes the skills:
 *   no analyzer warm-up (the policy's analyzer is never read);
 * - `grpo` and `gigpo`: warm up the policy only, then RL updates without analysis, λ_opd = 0
 *   (they differ only in their `advantage` defaults, jobs/spec.ts `armDefaults`);
 * - `sft`: the warm-up stages only (policy and analyzer), no updates.
 * π_ref exists for RL methods with `optim.kl_coef` > 0 (it is the warm-up checkpoint).
 */
import type { JobSpec } from "../../jobs/mod.ts";

/** A warm-up stage (its name is also the progress stage and the metric prefix). */
export type WarmupStage = "warmup_policy" | "warmup_analyzer";

/** The run of a job (see module doc). */
export interface RunPlan {
  /** RL updates after the warm-up (0 for `sft`). */
  steps: number;
  /** Warm-up stages in order (none with `warmup.skip`). */
  warmup: readonly WarmupStage[];
  /** Whether rollouts are analysed into skills (and the skill library is saved). */
  analysis: boolean;
  /** Which trajectories the analyzer reads when `analysis` is on. */
  analyze: "all" | "failed_only";
  /** Who writes the skills when `analysis` is on (JobSpec `seed.skill_source`). */
  skillSource: "policy" | "reference";
  /** The λ_opd of the update: `seed.opd_coef` with analysis, else 0 (GRPO). */
  opd_coef: number;
  /** Whether a reference policy π_ref is kept for the KL term. */
  reference: boolean;
}

/** The run plan of `spec` (see module doc). */
export function runPlan(spec: JobSpec): RunPlan {
  const rl = spec.method !== "sft";
  const analysis = spec.method === "seed" && spec.seed.analyze !== "none";
  const skillSource = spec.seed.skill_source;
  const analyzerWarmup = spec.method === "sft" || (analysis && skillSource === "policy");
  return {
    steps: rl ? spec.steps : 0,
    warmup: spec.warmup.skip
      ? []
      : analyzerWarmup
      ? ["warmup_policy", "warmup_analyzer"]
      : ["warmup_policy"],
    analysis,
    analyze: spec.seed.analyze === "failed_only" ? "failed_only" : "all",
    skillSource,
    opd_coef: analysis ? spec.seed.opd_coef : 0,
    reference: rl && spec.optim.kl_coef > 0,
  };
}
