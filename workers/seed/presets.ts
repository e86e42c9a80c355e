/**
 * Job presets for the demo (`deno task demo`): specs sized to finish in minutes on 2 CPU cores
 * and to show eval success rising from step 0 (after warm-up) to the last step.
 */
import type { JobSpecInput } from "../../jobs/spec.ts";

/** Demo JobSpecs by environment id (see module doc; measured numbers in the README). */
export const DEMO_PRESETS: Record<string, JobSpecInput> = {
  sokoban: {
    method: "seed",
    model: { base: "builtin:tiny" },
    env: { id: "sokoban", max_turns: 20, history: 0 },
    rollout: { tasks_per_step: 8, group_size: 4, temperature: 1, max_new_tokens: 8 },
    advantage: { estimator: "grpo", norm: "mean_std", invalid_action_penalty: 1 },
    seed: { analyzer_max_new_tokens: 64, analyzer_max_steps: 3, analyzer_max_field_chars: 200 },
    optim: {
      lr: 3e-4,
      mini_batch_size: 64,
      entropy_coef: 0.01,
      lr_schedule: "warmup",
      warmup_steps: 2,
    },
    warmup: {
      policy: { episodes: 48, epochs: 2, lr: 3e-3, batch_size: 16 },
      analyzer: { episodes: 16, epochs: 1, lr: 1e-3, batch_size: 16 },
    },
    steps: 16,
    eval_every: 0,
    checkpoint_every: 8,
    eval: { episodes: 96, temperature: 1 },
    random_seed: 7,
  },
};
