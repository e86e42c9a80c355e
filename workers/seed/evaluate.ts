/**
 * Evaluation (README.md, Algorithm, "Evaluation"): the policy plays `episodes` tasks of each split
 * once, at the eval temperature (0 = greedy), and reports success rate, mean score and per-family
 * success. The tasks of a split are the same at every evaluation of a job (seeded by `random_seed`
 * only), so step 0 (after warm-up) and the last step are compared on identical tasks.
 */
import type { AsyncEnvironment, Split } from "../envs/mod.ts";
import { type RolloutTrajectory, runRollouts } from "./rollout.ts";
import { ACTION_STOP, type TextPolicy } from "./text_policy.ts";

/** Results of one split. */
export interface SplitEval {
  split: Split;
  episodes: number;
  /** Share of episodes won, in [0, 1]. */
  success_rate: number;
  /** Mean `trajectory.score` (env units). */
  score: number;
  /** Mean turns per episode. */
  mean_turns: number;
  /** Success rate per task family. */
  families: Record<string, { episodes: number; success_rate: number }>;
}

/** Options of {@link evaluate}. */
export interface EvaluateOptions {
  env: AsyncEnvironment;
  envOptions: Record<string, unknown>;
  splits: readonly Split[];
  episodes: number;
  /** 0 = greedy. */
  temperature: number;
  maxTurns: number;
  historyLength: number;
  maxNewTokens: number;
  /** Seed of the task draws and sampling (fixed per job). */
  seed: number;
  signal?: AbortSignal;
}

/** Plays every split (see module doc); also returns the tokens generated and the episodes. */
export async function evaluate(
  text: TextPolicy,
  options: EvaluateOptions,
): Promise<{ splits: SplitEval[]; tokensGenerated: number; trajectories: RolloutTrajectory[] }> {
  const out: SplitEval[] = [];
  const played: RolloutTrajectory[] = [];
  let tokensGenerated = 0;
  for (const [k, split] of options.splits.entries()) {
    const seed = (options.seed + 104729 * (k + 1)) >>> 0;
    const tasks = await options.env.sampleTasks(split, options.episodes, seed, options.envOptions);
    let turn = 0;
    const trajectories = await runRollouts({
      env: options.env,
      tasks,
      groupSize: 1,
      maxTurns: options.maxTurns,
      historyLength: options.historyLength,
      signal: options.signal,
      idPrefix: `eval/${split}/`,
      policy: async (prompts, images) => {
        const g = await text.generate(prompts, {
          maxNewTokens: options.maxNewTokens,
          temperature: options.temperature,
          seed: (seed + 31 * ++turn) >>> 0,
          stop: [ACTION_STOP],
          images,
        });
        tokensGenerated += g.tokens;
        return g.texts;
      },
    });
    played.push(...trajectories);
    const families: SplitEval["families"] = {};
    for (const t of trajectories) {
      const f = (families[t.task.family] ??= { episodes: 0, success_rate: 0 });
      f.episodes++;
      f.success_rate += t.won ? 1 : 0;
    }
    for (const f of Object.values(families)) f.success_rate /= f.episodes;
    const n = Math.max(1, trajectories.length);
    out.push({
      split,
      episodes: trajectories.length,
      success_rate: trajectories.filter((t) => t.won).length / n,
      score: trajectories.reduce((s, t) => s + t.score, 0) / n,
      mean_turns: trajectories.reduce((s, t) => s + t.steps.length, 0) / n,
      families,
    });
  }
  return { splits: out, tokensGenerated, trajectories: played };
}

/**
 * Eval results as metric series entries: `eval/<split>/success_rate`, `eval/<split>/score`,
 * `eval/<split>/mean_turns` and `eval/<split>/<family>/success_rate`.
 */
export function evalMetrics(splits: readonly SplitEval[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of splits) {
    out[`eval/${s.split}/success_rate`] = s.success_rate;
    out[`eval/${s.split}/score`] = s.score;
    out[`eval/${s.split}/mean_turns`] = s.mean_turns;
    for (const [f, v] of Object.entries(s.families)) {
      out[`eval/${s.split}/${f}/success_rate`] = v.success_rate;
    }
  }
  return out;
}
