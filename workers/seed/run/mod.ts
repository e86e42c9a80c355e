/**
 * The run's plumbing around the SEED algorithm (`workers/seed/*.ts`): what turns a claimed
 * `seed`/`grpo`/`sft` job into calls of the algorithm and its results into stored artifacts.
 *
 * - `handler.ts`: the job handler (set-up, resume, warm-up, steps, evaluation, events);
 * - `warmup_stage.ts`: runs the warm-up stages the run plan lists, with progress and events
 *   (the warm-up data and SFT steps are the algorithm's, `../warmup.ts`);
 * - `checkpoint.ts`: Hugging Face folder + optimizer state + `trainer_state.json`, and reading one
 *   back to resume;
 * - `trajectory_dump.ts`: the rollout and evaluation dumps (JSON + PNG) written at each step;
 * - `model_source.ts`: `model.base` → a model (builtin, a job's checkpoint, an uploaded model or
 *   an S3 folder), and the start-up check that the model fits the environment;
 * - `seeds.ts`: one random stream per use, all from the job's `random_seed`.
 *
 * Why this layout: the algorithm is what the folder is for and what workers/seed/README.md,
 * Algorithm, cites step by step, so it keeps the top of `workers/seed/`; the plumbing, which
 * depends on the job store, the worker loop and the artifact layout, sits one folder down.
 * Direction: this folder imports the algorithm (`../*.ts`), `jobs/`, `workers/worker/`,
 * `workers/model/`, `workers/envs/` and `workers/engine/`; no file of the algorithm imports it, so
 * the algorithm can be read, tested and reused without a job, a database or an object store. This
 * is the run's public surface; `workers/seed/mod.ts`, the algorithm's, does not re-export it
 * (tests/layering.ts).
 */
export * from "./seeds.ts";
export * from "./model_source.ts";
export * from "./checkpoint.ts";
export { createSeedHandler, registerSeedHandlers, type SeedHandlerOptions } from "./handler.ts";
