/**
 * The built-in presets: JobSpecs for `builtin:tiny` on two environments, sized to finish in minutes
 * on 2 CPU cores. `sokoban` is what `deno task demo` submits (api/demo/specs.ts); `household` is
 * bench:learn's `household-demo`. They live in jobs/ because the demo client, the dashboard, the
 * JobSpec reference and the benchmarks all use them, and api/ may not import workers/.
 *
 * A preset holds only what differs from the schema defaults (jobs/spec.ts), and every field it
 * sets is listed in {@link PRESET_FIELD_REASONS} with why it is per environment or per size; the
 * settings the presets share (RL optimizer but for sokoban's lr, analyzer warm-up, analyzer prompt)
 * are the schema defaults, so `{"env":{"id":"sokoban"}}` trains with them.
 * tests/jobs/presets_test.ts holds the presets to that. How the values were measured:
 * bench/RESULTS.md.
 *
 * `household-hard` (bench:learn's env of that name) is the sparse-signal regime the paper is about:
 * all six household families, so that after the warm-up most groups are all-fail (seeds 21–25:
 * 10.7% / 10.3% held-out success, 55% of GRPO's training groups all-fail) and outcome RL has little
 * signal. Its skill-conditioned warm-up turns are household's skilled demonstrations
 * (workers/seed/README.md, "Warm-up"): a skill naming the goal object type's usual places and an
 * expert that searches them first. Over seeds 21–25 the skill in the prompt lowers the log-prob of
 * lost trajectories' actions by 0.13–0.26 nats per token, but success with it is at least that
 * without on 2 of 5 warm-ups only. Measurements: bench/RESULTS.md.
 */
import type { JobSpecInput } from "./spec.ts";

/** The demo's budget: 10 updates, evaluated at 0, 5 and 10 (checkpoints every 5, the default). */
const DEMO_SCHEDULE = {
  steps: 10,
  eval_every: 5,
  eval: { episodes: 200, temperature: 1 },
  random_seed: 7,
} satisfies Partial<JobSpecInput>;

/**
 * The presets by name, each starting with its environment id (see the module doc): `sokoban` is
 * the demo's, `household` bench:learn's `household-demo`, `household-hard` its sparse-signal env.
 */
export const DEMO_PRESETS: Record<string, JobSpecInput> = {
  sokoban: {
    env: {
      id: "sokoban",
      options: { relative_positions: true, prompt: "compact" },
      history: 0,
    },
    rollout: { max_new_tokens: 8, tasks_per_step: 16 },
    optim: { lr: 1e-4 },
    seed: { analyzer_max_new_tokens: 96, analyzer_max_steps: 1 },
    warmup: {
      policy: {
        episodes: 400,
        epochs: 20,
        lr: 2e-3,
        lr_schedule: "cosine",
        batch_size: 32,
        target_success: 0.45,
        check_every: 56,
        check_episodes: 64,
      },
      analyzer: { episodes: 512, epochs: 3 },
    },
    ...DEMO_SCHEDULE,
  },
  household: {
    env: {
      id: "household",
      options: {
        families: ["pick_and_place", "examine_in_light"],
        prompt: "compact",
        status_line: true,
        expert: "search",
      },
      history: 0,
    },
    rollout: { max_new_tokens: 16 },
    seed: { analyzer_max_steps: 3 },
    warmup: {
      policy: { episodes: 400, epochs: 12, skill_epochs: 3, lr: 2e-3, batch_size: 32 },
    },
    ...DEMO_SCHEDULE,
  },
  "household-hard": {
    env: {
      id: "household",
      options: { prompt: "compact", status_line: true, expert: "search" },
      history: 0,
    },
    rollout: { max_new_tokens: 16 },
    advantage: { invalid_action_penalty: 0 },
    seed: { analyzer_max_steps: 3 },
    warmup: {
      policy: {
        episodes: 400,
        epochs: 8,
        skill_epochs: 3,
        lr: 2e-3,
        batch_size: 32,
        check_episodes: 64,
      },
    },
    experimental: { corrective_share: 0.25 },
    ...DEMO_SCHEDULE,
  },
};

/**
 * Why a preset sets each field it sets, by dotted JobSpec path (a path covers the fields below
 * it). A preset field that is not listed, or that repeats its schema default, fails
 * tests/jobs/presets_test.ts.
 */
export const PRESET_FIELD_REASONS: Readonly<Record<string, string>> = {
  "env.options": "per environment: builtin:tiny learns sokoban only with relative positions and " +
    "the compact prompt, household only with the compact prompt, the status line and the " +
    "searching expert (without them it stays at chance)",
  "env.history": "per size: builtin:tiny's prompts stay short with no past steps shown",
  "rollout.max_new_tokens": "per environment: a sokoban action is ~8 tokens with its tags, a " +
    "household action up to 15",
  "rollout.tasks_per_step": "per environment and size: on the sokoban demo's ten warm-ups (seeds " +
    "11–15 at 1 and 2 threads) 16 tasks per update instead of 8 raised RL's gain in 10 updates " +
    "from +4.7 / +3.1 to +5.7 / +5.0 points (SEED; GRPO +2.8 / +3.4 → +6.3 / +4.5), with gains " +
    "on 8–9 of 10 warm-ups instead of 7 (bench/RESULTS.md 2026-12-07)",
  "advantage.invalid_action_penalty": "per environment: in household-hard most groups are " +
    "all-fail, where the penalty is the only spread and mean/std normalisation blows it up to " +
    "full-size advantages; with the authors' p = 0.1 every arm fell from 9.5% to 0–3% held-out " +
    "success in 8 updates (lr 3e-4, 1e-4 and 3e-5), with p = 0 GRPO rose to 16% (seed 21, " +
    "bench/RESULTS.md 2026-12-07)",
  "optim.lr": "per environment and size: on the sokoban demo's warm-ups (seeds 11–13 at 1 and 2 " +
    "threads) ten updates at the default lr 3e-4 lowered test_seen success on 4 of 5 (−19 to +3.5 " +
    "points, GRPO alike); at 1e-4 they moved it −0.5 to +11 points and ended above the 3e-4 run " +
    "on all five, on both splits (mean +8.7 / +10.4 points; bench/RESULTS.md 2026-12-07)",
  "seed.analyzer_max_new_tokens": "per environment: sokoban's reference analyses run to ~74 " +
    "tokens (household keeps the default 192: its analyses run to 184)",
  "seed.analyzer_max_steps": "per environment: sokoban's analyzer reads the last step (earlier " +
    "moves are one `Earlier effects:` line), household's the last 3; every step cost 5–10× the " +
    "analysis time for no gain",
  "warmup.policy": "per environment and size: the policy warm-up's length, lr and stop rule are " +
    "tuned per environment for builtin:tiny (sokoban stops at 45% held-out success)",
  "warmup.analyzer.episodes": "per environment: sokoban's analyzer needs 512 trajectories × 3 " +
    "epochs to write truthful skills",
  "warmup.analyzer.epochs": "per environment: see warmup.analyzer.episodes",
  "steps": "per size: the demo's 10 updates fit in 10 minutes on 2 cores",
  "eval_every": "per size: the demo evaluates half-way and at the end",
  "eval.episodes": "per size: 200 episodes per split give a ±6-point 95% interval",
  "eval.temperature": "per size: sampled success, the measure the demo and bench:learn report",
  "random_seed": "per size: the demo's seed, so its documented output repeats",
  "experimental.corrective_share": "per environment: household-hard's warm-up adds corrective " +
    "samples so that its policy reads avoidance skills at all six families' length",
};
