/**
 * The job specs `deno task demo` submits: one constant per environment and method, the same JSON
 * a user would `POST /v1/jobs`. Edit them here. They are sized so that one run finishes in under
 * ten minutes on two CPU cores with `builtin:tiny`.
 */
import { type JobSpecInput, parseJobSpec } from "../../jobs/mod.ts";
import { DEMO_PRESETS } from "../../jobs/presets.ts";

/** Environments the demo knows a spec for. */
export const DEMO_ENVS = ["sokoban", "household", "webshop", "search"] as const;
/** One of {@link DEMO_ENVS}. */
export type DemoEnv = (typeof DEMO_ENVS)[number];

/**
 * Methods the demo can run (`grpo` = the same pipeline without skills; workers/seed/README.md,
 * Algorithm, "Methods").
 */
export const DEMO_METHODS = ["seed", "grpo"] as const;
/** One of {@link DEMO_METHODS}. */
export type DemoMethod = (typeof DEMO_METHODS)[number];

/**
 * Sokoban 6×6, one box, with the small-model options (relative positions, compact prompt): the
 * trainer's tuned preset `DEMO_PRESETS.sokoban` (jobs/presets.ts, shared by the demo, the trainer's
 * bench and the docs): policy SFT until 45% held-out success (336–672 steps over seeds, with
 * skill-conditioned demonstrations throughout), ~216 steps of analyzer SFT, then 10 SEED updates
 * of 16 tasks × 8 copies, evaluated (temperature 1, 200 episodes per split) after warm-up, half-way
 * and at the end.
 */
export const SOKOBAN_SEED: JobSpecInput = DEMO_PRESETS.sokoban;

/** {@link SOKOBAN_SEED} as plain GRPO (λ_opd = 0, no analysis): the baseline. */
export const SOKOBAN_GRPO: JobSpecInput = { ...SOKOBAN_SEED, method: "grpo" };

/**
 * The warm-up of the household and webshop demos: short (their prompts are 3–5× longer than the
 * compact Sokoban one), so these runs show the pipeline on those environments, not learning.
 */
const SHORT_WARMUP: JobSpecInput["warmup"] = {
  policy: { episodes: 48, epochs: 2, lr: 3e-3, batch_size: 16 },
  analyzer: { episodes: 16, epochs: 1, lr: 1e-3, batch_size: 16 },
};

/** ALFWorld-style household, pick-and-place only (the shortest family), SEED. */
export const HOUSEHOLD_SEED: JobSpecInput = {
  ...SOKOBAN_SEED,
  env: { id: "household", options: { families: ["pick_and_place"] }, max_turns: 15, history: 1 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 16 },
  warmup: SHORT_WARMUP,
  eval: { episodes: 48, temperature: 1 },
};

/** {@link HOUSEHOLD_SEED} as plain GRPO. */
export const HOUSEHOLD_GRPO: JobSpecInput = { ...HOUSEHOLD_SEED, method: "grpo" };

/** WebShop-style shopping, SEED. */
export const WEBSHOP_SEED: JobSpecInput = {
  ...SOKOBAN_SEED,
  env: { id: "webshop", max_turns: 10, history: 1 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
  warmup: SHORT_WARMUP,
  eval: { episodes: 48, temperature: 1 },
};

/** {@link WEBSHOP_SEED} as plain GRPO. */
export const WEBSHOP_GRPO: JobSpecInput = { ...WEBSHOP_SEED, method: "grpo" };

/**
 * Search-augmented QA, SEED: the compact prompt (task line, one step of history, the results), the
 * authors' 4 turns, and room for the longest expert action (18 tokens) and analysis (~130 tokens).
 */
export const SEARCH_SEED: JobSpecInput = {
  ...SOKOBAN_SEED,
  env: { id: "search", options: { prompt: "compact" }, max_turns: 4, history: 1 },
  rollout: { tasks_per_step: 4, group_size: 4, temperature: 1, max_new_tokens: 24 },
  seed: {
    analyzer_max_new_tokens: 160,
    analyzer_max_steps: 4,
    analyzer_max_field_chars: 400,
  },
  warmup: SHORT_WARMUP,
  eval: { episodes: 48, temperature: 1 },
};

/** {@link SEARCH_SEED} as plain GRPO. */
export const SEARCH_GRPO: JobSpecInput = { ...SEARCH_SEED, method: "grpo" };

/** Every demo spec by environment, then method. */
export const DEMO_SPECS: Record<DemoEnv, Record<DemoMethod, JobSpecInput>> = {
  sokoban: { seed: SOKOBAN_SEED, grpo: SOKOBAN_GRPO },
  household: { seed: HOUSEHOLD_SEED, grpo: HOUSEHOLD_GRPO },
  webshop: { seed: WEBSHOP_SEED, grpo: WEBSHOP_GRPO },
  search: { seed: SEARCH_SEED, grpo: SEARCH_GRPO },
};

/** Command-line overrides of a demo spec (each replaces one field when given). */
export interface DemoOverrides {
  /**
   * RL updates (`steps`); checkpoints (and evaluations, unless only at the end) then happen
   * half-way and at the end.
   */
  steps?: number;
  /** Episodes per evaluation split (`eval.episodes`). */
  evalEpisodes?: number;
  /**
   * `warmup.policy.episodes` and `warmup.analyzer.episodes`, each then trained for one epoch (the
   * policy's with the skill-conditioned demonstrations).
   */
  warmupEpisodes?: number;
  /** `random_seed`. */
  randomSeed?: number;
}

/**
 * Episodes per evaluation split of a quick run (`--steps` or `--warmup-episodes` below the
 * spec's) when `--eval-episodes` is not given, and the most episodes of its warm-up checks: a
 * quick run learns nothing, so 200 episodes per split (±7 points) would only make it several
 * times longer; 32 (±17 points) show the pipeline end to end.
 */
export const QUICK_EVAL_EPISODES = 32;

/**
 * The spec to submit for `env`/`method` with `overrides` applied (a fresh object; the constants
 * are never changed). With `steps`, `checkpoint_every` (and a non-zero `eval_every`) become
 * ⌈steps/2⌉; evaluation always happens after warm-up (step 0) and at the last step. A quick run
 * (`steps` below the spec's, or `warmupEpisodes` below its policy warm-up's) evaluates
 * {@link QUICK_EVAL_EPISODES} per split unless `evalEpisodes` is given, and its warm-up checks
 * (`warmup.policy.check_episodes`) play at most as many.
 */
export function demoSpec(
  env: DemoEnv,
  method: DemoMethod,
  overrides: DemoOverrides = {},
): JobSpecInput {
  const spec: JobSpecInput = structuredClone(DEMO_SPECS[env][method]);
  const quick = isQuick(spec, overrides);
  if (overrides.steps !== undefined) {
    spec.steps = overrides.steps;
    if (spec.eval_every !== 0) spec.eval_every = Math.max(1, Math.ceil(overrides.steps / 2));
    spec.checkpoint_every = Math.max(1, Math.ceil(overrides.steps / 2));
  }
  if (overrides.evalEpisodes !== undefined) {
    spec.eval = { ...spec.eval, episodes: overrides.evalEpisodes };
  } else if (quick) {
    const episodes = Math.min(spec.eval?.episodes ?? QUICK_EVAL_EPISODES, QUICK_EVAL_EPISODES);
    spec.eval = { ...spec.eval, episodes };
  }
  if (overrides.warmupEpisodes !== undefined) {
    const episodes = overrides.warmupEpisodes;
    // One epoch: it is the skill-conditioned one (`skill_epochs` absent = every epoch).
    const { skill_epochs: _skillEpochs, ...policy } = spec.warmup?.policy ?? {};
    spec.warmup = {
      ...spec.warmup,
      policy: {
        ...policy,
        episodes,
        epochs: 1,
        ...(quick && policy.check_episodes !== undefined
          ? { check_episodes: Math.min(policy.check_episodes, QUICK_EVAL_EPISODES) }
          : {}),
      },
      analyzer: { ...spec.warmup?.analyzer, episodes, epochs: 1 },
    };
  }
  if (overrides.randomSeed !== undefined) spec.random_seed = overrides.randomSeed;
  return spec;
}

/** True when `overrides` shorten `spec`'s RL (`steps`) or its policy warm-up (`warmupEpisodes`). */
function isQuick(spec: JobSpecInput, overrides: DemoOverrides): boolean {
  const { steps, warmup } = parseJobSpec(spec); // with the JobSpec's defaults filled in
  const episodes = warmup.policy.episodes;
  return (overrides.steps !== undefined && overrides.steps < steps) ||
    (overrides.warmupEpisodes !== undefined && overrides.warmupEpisodes < episodes);
}
