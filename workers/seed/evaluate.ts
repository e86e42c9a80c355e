/**
 * Evaluation: the policy plays `episodes` tasks of each split once, at the eval temperature
 * (0 = greedy), and reports success rate, mean score and per-family success. The tasks of a split
 * are the same at every evaluation of a job (seeded by `random_seed` only), so step 0 (after
 * warm-up) and the last step are compared on identical tasks. With a skill chooser (JobSpec
 * `eval.skills: "library"`, see workers/skills/choice.ts) each split is played a second time, same
 * tasks and sampling seeds, with the chosen skill in every prompt: success with and without the
 * skill, i.e. what the skill library is worth on its own.
 */
import type { AsyncEnvironment, Split, Task } from "../envs/mod.ts";
import { type AsyncEnvironmentLike, type RolloutTrajectory, runRollouts } from "./rollout.ts";
import { insertSkill } from "../skills/mod.ts";
import { actionPolicy, type TextPolicy } from "./text_policy.ts";

/** Success figures of one way of playing a split. */
export interface SplitOutcome {
  /** Share of episodes won, in [0, 1]. */
  success_rate: number;
  /** Mean `trajectory.score` (env units). */
  score: number;
  /** Mean turns per episode. */
  mean_turns: number;
  /** Success rate per task family. */
  families: Record<string, { episodes: number; success_rate: number }>;
}

/** Results of one split (the plain prompts; `with_skill` when skills were evaluated too). */
export interface SplitEval extends SplitOutcome {
  split: Split;
  episodes: number;
  /**
   * JobSpec `eval.skills: "library"`: the same tasks and sampling seeds played with the chosen
   * skill inserted into every prompt (`insertSkill`, the block re-scoring uses).
   * `episodes_with_skill` counts the episodes that had a skill to insert; when it is 0 nothing
   * changes, so the figures are the plain ones (not played twice).
   */
  with_skill?: SplitOutcome & {
    episodes_with_skill: number;
    /** The distinct skills inserted in this split, by family. */
    skills: Record<string, string>;
  };
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
  /**
   * The skill to put into the prompts of a task (e.g. `bestSkillForFamily` of the job's library),
   * or null for none. When given, every split is also played with skills (see `with_skill`).
   */
  skillFor?: (task: Task) => string | null;
  signal?: AbortSignal;
}

/** Success figures of played episodes. */
function outcome(trajectories: readonly RolloutTrajectory[]): SplitOutcome {
  const families: SplitOutcome["families"] = {};
  for (const t of trajectories) {
    const f = (families[t.task.family] ??= { episodes: 0, success_rate: 0 });
    f.episodes++;
    f.success_rate += t.won ? 1 : 0;
  }
  for (const f of Object.values(families)) f.success_rate /= f.episodes;
  const n = Math.max(1, trajectories.length);
  return {
    success_rate: trajectories.filter((t) => t.won).length / n,
    score: trajectories.reduce((s, t) => s + t.score, 0) / n,
    mean_turns: trajectories.reduce((s, t) => s + t.steps.length, 0) / n,
    families,
  };
}

/**
 * `env` whose prompts carry `skillFor(task)` (inserted with `insertSkill`); tasks without a skill
 * keep their prompt.
 */
function withSkills(
  env: AsyncEnvironment,
  skillFor: (task: Task) => string | null,
): AsyncEnvironmentLike {
  return {
    createEpisode: (task) => env.createEpisode(task),
    parseAction: (response) => env.parseAction(response),
    async buildPrompt(input) {
      const prompt = await env.buildPrompt(input);
      const skill = skillFor(input.task);
      return skill === null ? prompt : insertSkill(prompt, skill);
    },
  };
}

/**
 * Plays every split (see module doc); also returns the tokens generated and the plain episodes.
 * With `skillFor`, each split is played a second time on the same tasks with the same sampling
 * seeds, with the skill in the prompts; those episodes are returned as `skillTrajectories`.
 */
export async function evaluate(
  text: TextPolicy,
  options: EvaluateOptions,
): Promise<{
  splits: SplitEval[];
  tokensGenerated: number;
  trajectories: RolloutTrajectory[];
  skillTrajectories: RolloutTrajectory[];
}> {
  const out: SplitEval[] = [];
  const played: RolloutTrajectory[] = [];
  const playedWithSkill: RolloutTrajectory[] = [];
  let tokensGenerated = 0;
  for (const [k, split] of options.splits.entries()) {
    const seed = (options.seed + 104729 * (k + 1)) >>> 0;
    const tasks = await options.env.sampleTasks(split, options.episodes, seed, options.envOptions);
    const play = async (env: AsyncEnvironmentLike, idPrefix: string) => {
      return await runRollouts({
        env,
        tasks,
        groupSize: 1,
        maxTurns: options.maxTurns,
        historyLength: options.historyLength,
        signal: options.signal,
        idPrefix,
        policy: actionPolicy(text, {
          maxNewTokens: options.maxNewTokens,
          temperature: options.temperature,
          seed,
          onTokens: (n) => tokensGenerated += n,
        }),
      });
    };
    const trajectories = await play(options.env, `eval/${split}/`);
    played.push(...trajectories);
    const result: SplitEval = { split, episodes: trajectories.length, ...outcome(trajectories) };
    if (options.skillFor) {
      const skillFor = options.skillFor;
      const skills: Record<string, string> = {};
      let withSkill = 0;
      for (const task of tasks) {
        const skill = skillFor(task);
        if (skill === null) continue;
        withSkill++;
        skills[task.family] = skill;
      }
      const again = withSkill > 0
        ? await play(withSkills(options.env, skillFor), `eval-skill/${split}/`)
        : trajectories;
      if (withSkill > 0) playedWithSkill.push(...again);
      result.with_skill = { ...outcome(again), episodes_with_skill: withSkill, skills };
    }
    out.push(result);
  }
  return { splits: out, tokensGenerated, trajectories: played, skillTrajectories: playedWithSkill };
}

/**
 * Eval results as metric series entries: `eval/<split>/success_rate`, `eval/<split>/score`,
 * `eval/<split>/mean_turns` and `eval/<split>/<family>/success_rate`; with skills evaluated also
 * `eval/<split>/with_skill/success_rate`, `…/with_skill/score`, `…/with_skill/mean_turns` and
 * `eval/<split>/skill_coverage` (share of episodes that had a skill to insert).
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
    if (s.with_skill) {
      out[`eval/${s.split}/with_skill/success_rate`] = s.with_skill.success_rate;
      out[`eval/${s.split}/with_skill/score`] = s.with_skill.score;
      out[`eval/${s.split}/with_skill/mean_turns`] = s.with_skill.mean_turns;
      out[`eval/${s.split}/skill_coverage`] = s.episodes > 0
        ? s.with_skill.episodes_with_skill / s.episodes
        : 0;
    }
  }
  return out;
}
