/**
 * Job presets for the demo (`deno task demo`): specs sized to finish in minutes on 2 CPU cores. They
 * live in jobs/ because both the demo client (api/demo_specs.ts) and the trainer's bench
 * (bench/preset.ts) use them, and api/ may not import workers/ (DESIGN.md §2).
 *
 * sokoban (builtin:tiny, method seed): measured in process with `deno run -A bench/preset.ts
 * sokoban` on the shared 2-core machine (load average ≈ 2.8): 324 s wall, 16 updates of 8 tasks ×
 * 4 copies. Eval success (96 episodes per split, temperature 1) step 0 → 16: test_seen 0.042 →
 * 0.042, test_unseen 0.063 → 0.042 — no real improvement. What RL does measurably learn in that
 * budget is the answer format: the rollouts' invalid-action rate falls from 0.32 to 0.05 over the
 * 16 updates (invalid penalty 1, so every group has a signal). A 1M-parameter model trained from
 * scratch does not learn the grid → move mapping in minutes: policy SFT on 2,600 expert turns
 * stayed at the uniform action loss for 400 steps (batch 32), so the warmed policy is a random
 * walk and its eval success stays at the random-walk level (uniform random play: 11.5% seen /
 * 5.5% unseen at 20 turns). Warm-up and step timings vary 3–10× with the machine's load, and
 * onnxruntime on 2 threads does not reproduce a run bit for bit, so repeated runs differ.
 *
 * `analyzer_max_new_tokens` is 96 because the reference analyses the analyzer is warmed up on run to
 * ~74 tokens for Sokoban: a smaller budget truncates every analysis and nothing can parse.
 */
import type { JobSpecInput } from "./spec.ts";

/** Demo JobSpecs by environment id (see module doc; measured numbers in the README). */
export const DEMO_PRESETS: Record<string, JobSpecInput> = {
  sokoban: {
    method: "seed",
    model: { base: "builtin:tiny" },
    env: { id: "sokoban", max_turns: 20, history: 0 },
    rollout: { tasks_per_step: 8, group_size: 4, temperature: 1, max_new_tokens: 8 },
    advantage: { estimator: "grpo", norm: "mean_std", invalid_action_penalty: 1 },
    seed: { analyzer_max_new_tokens: 96, analyzer_max_steps: 3, analyzer_max_field_chars: 200 },
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
