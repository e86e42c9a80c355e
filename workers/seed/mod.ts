/**
 * The SEED algorithm (Wu et al. 2026, arXiv 2607.14777): the public surface of the algorithm,
 * which loads no job plumbing. The formulas, step by step, are in workers/seed/README.md,
 * Algorithm. The run's plumbing is `run/` with its own surface, `run/mod.ts` (not re-exported
 * here; no algorithm file imports it: tests/layering.ts). Each step's code:
 *
 * - 1 rollout: `rollout.ts` (B tasks × G copies, multi-turn, batched generation);
 * - 2 advantage: `advantage.ts` (GRPO pooled, GiGPO; the `advantageEstimators` registry),
 *   `samples.ts` (one sample per turn, scores, teacher mask, mini-batches);
 * - 3 analyze and 4 re-score: `analyze.ts` (the batched analyze step);
 *   the analyzer prompt, lenient parse, analysis schema, generation settings, skill insertion and
 *   the teacher prompts live in workers/skills (`../skills/mod.ts`, shared with the server; not
 *   re-exported here);
 * - 5 update: `objective.ts` (the SEED objective, the only implementation of the loss, which the
 *   model builds its train graph from), `trainer.ts` (orchestrates the phases and calls
 *   `Policy.trainStep` with that objective);
 * - 6 skills: the library and the choice of a library skill at evaluation, in workers/skills;
 * - warm-up and evaluation: `warmup.ts` (demonstrations, analyzer annotations, SFT steps),
 *   `evaluate.ts`;
 * - metrics: `metrics.ts` (per-step metrics), `signal_metrics.ts` (is there a distillation
 *   signal: teacher gap Δ by outcome, corr(Δ, A), skill quality);
 * - `text_policy.ts` (text in, text out over a `Policy`: what rollout, analyzer, warm-up and
 *   evaluation generate and score through), `errors.ts`.
 *
 * What a job's method means (analysis on or off, the effective λ_opd, whether π_ref exists) is
 * derived once from the spec in `run_plan.ts`.
 *
 * The run's plumbing, `run/`: `run/handler.ts` (the `seed`/`grpo`/`sft` job handler: set-up,
 * resume, stages, events), `run/warmup_stage.ts` (the warm-up stages with progress and events),
 * `run/checkpoint.ts` (Hugging Face folder + trainer state), `run/trajectory_dump.ts`,
 * `run/model_source.ts` (`model.base` → a model), `run/seeds.ts` (one random stream per use, all
 * from the job's `random_seed`).
 */
export * from "./errors.ts";
export * from "./advantage.ts";
export * from "./analyze.ts";
export * from "./samples.ts";
export * from "./objective.ts";
export * from "./run_plan.ts";
export * from "./rollout.ts";
export * from "./metrics.ts";
export * from "./signal_metrics.ts";
export * from "./text_policy.ts";
export * from "./warmup.ts";
export * from "./warmup_skill_check.ts";
export * from "./evaluate.ts";
export * from "./trainer.ts";
