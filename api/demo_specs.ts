/**
 * The job specs `deno task demo` submits: one constant per environment and method, the same JSON
 * a user would `POST /v1/jobs`. Edit them here. They are sized so that one run finishes in under
 * ten minutes on two CPU cores with `builtin:tiny` (the trainer's own tuned preset lives in
 * workers/seed/presets.ts, which api/ may not import: DESIGN.md §2 — keep the two in step).
 */
import type { JobSpecInput } from "../jobs/mod.ts";

/** Environments the demo knows a spec for. */
export const DEMO_ENVS = ["sokoban", "household", "webshop"] as const;
/** One of {@link DEMO_ENVS}. */
export type DemoEnv = (typeof DEMO_ENVS)[number];

/** Methods the demo can run (`grpo` = the same pipeline without skills; DESIGN.md §3). */
export const DEMO_METHODS = ["seed", "grpo"] as const;
/** One of {@link DEMO_METHODS}. */
export type DemoMethod = (typeof DEMO_METHODS)[number];

/** Sokoban 6×6, one box: warm-up on expert demos, then 8 SEED updates of 4 tasks × 4 copies. */
export const SOKOBAN_SEED: JobSpecInput = {
  method: "seed",
  model: { base: "builtin:tiny" },
  env: { id: "sokoban", options: { size: 6, boxes: 1 }, max_turns: 12, history: 2 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 16 },
  seed: { opd_coef: 0.01, gate_beta: 5, analyze: "all", analyzer_max_new_tokens: 64 },
  optim: { lr: 1e-4, kl_coef: 0.01, entropy_coef: 0.001 },
  warmup: {
    policy: { episodes: 64, epochs: 2, lr: 1e-3 },
    analyzer: { episodes: 32, epochs: 2, lr: 1e-3 },
  },
  steps: 8,
  eval_every: 4,
  checkpoint_every: 4,
  eval: { splits: ["test_seen", "test_unseen"], episodes: 16, temperature: 0 },
  random_seed: 2026,
};

/** {@link SOKOBAN_SEED} as plain GRPO (λ_opd = 0, no analysis): the baseline. */
export const SOKOBAN_GRPO: JobSpecInput = { ...SOKOBAN_SEED, method: "grpo" };

/** ALFWorld-style household, pick-and-place only (the shortest family), SEED. */
export const HOUSEHOLD_SEED: JobSpecInput = {
  ...SOKOBAN_SEED,
  env: { id: "household", options: { families: ["pick_and_place"] }, max_turns: 15, history: 2 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
};

/** {@link HOUSEHOLD_SEED} as plain GRPO. */
export const HOUSEHOLD_GRPO: JobSpecInput = { ...HOUSEHOLD_SEED, method: "grpo" };

/** WebShop-style shopping, SEED. */
export const WEBSHOP_SEED: JobSpecInput = {
  ...SOKOBAN_SEED,
  env: { id: "webshop", options: {}, max_turns: 10, history: 2 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
};

/** {@link WEBSHOP_SEED} as plain GRPO. */
export const WEBSHOP_GRPO: JobSpecInput = { ...WEBSHOP_SEED, method: "grpo" };

/** Every demo spec by environment, then method. */
export const DEMO_SPECS: Record<DemoEnv, Record<DemoMethod, JobSpecInput>> = {
  sokoban: { seed: SOKOBAN_SEED, grpo: SOKOBAN_GRPO },
  household: { seed: HOUSEHOLD_SEED, grpo: HOUSEHOLD_GRPO },
  webshop: { seed: WEBSHOP_SEED, grpo: WEBSHOP_GRPO },
};

/** Command-line overrides of a demo spec (each replaces one field when given). */
export interface DemoOverrides {
  /** RL updates (`steps`); evaluation and checkpoints then happen at the middle and the end. */
  steps?: number;
  /** Episodes per evaluation split (`eval.episodes`). */
  evalEpisodes?: number;
  /** `random_seed`. */
  randomSeed?: number;
}

/**
 * The spec to submit for `env`/`method` with `overrides` applied (a fresh object; the constants
 * are never changed). With `steps`, `eval_every` and `checkpoint_every` become ⌈steps/2⌉ so the
 * run still evaluates and checkpoints half-way and at the end.
 */
export function demoSpec(
  env: DemoEnv,
  method: DemoMethod,
  overrides: DemoOverrides = {},
): JobSpecInput {
  const spec: JobSpecInput = structuredClone(DEMO_SPECS[env][method]);
  if (overrides.steps !== undefined) {
    spec.steps = overrides.steps;
    spec.eval_every = Math.max(1, Math.ceil(overrides.steps / 2));
    spec.checkpoint_every = Math.max(1, Math.ceil(overrides.steps / 2));
  }
  if (overrides.evalEpisodes !== undefined) {
    spec.eval = { ...spec.eval, episodes: overrides.evalEpisodes };
  }
  if (overrides.randomSeed !== undefined) spec.random_seed = overrides.randomSeed;
  return spec;
}
