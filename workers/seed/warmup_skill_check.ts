/**
 * Skill check after the warm-up (README.md, "Warm-up"): does the warmed policy read a skill in
 * its prompt? SEED's distillation feeds on the teacher gap Δ = ℓ_T − ℓ_old, the log-prob of the
 * policy's own tokens with the hindsight skill in the prompt minus without it; a policy that
 * ignores its prompt's skill block gives Δ ≈ 0 and SEED reduces to its RL baseline.
 *
 * On `episodes` train tasks (their own seed, never drawn by rollouts), at the rollout
 * temperature:
 * - the policy plays each task once with the ordinary prompt;
 * - Δ on lost trajectories: every turn of every lost trajectory is scored with and without that
 *   trajectory's reference skill (`env.referenceAnalysis`, the analyzer a perfect SEED would
 *   have) inserted as re-scoring inserts it (`insertSkill`); the mean over response tokens. A
 *   policy that reads the skill lowers its own mistaken actions: Δ < 0;
 * - success with the skill: the same tasks with the same sampling seeds, with a reference skill
 *   of each task in every prompt (evaluate.ts `skillFor`): the skill of the environment's skilled
 *   demonstration where it has one (household: where the goal object usually is), else the
 *   reference skill of an expert solve.
 */
import type { AsyncEnvironment, Task } from "../envs/mod.ts";
import { evaluate } from "./evaluate.ts";
import { insertSkill, meaningful } from "../skills/mod.ts";
import type { TextPolicy } from "./text_policy.ts";
import { expertEpisode } from "./warmup.ts";

/** Options of {@link skillCheck}. */
export interface SkillCheckOptions {
  env: AsyncEnvironment;
  /** JobSpec `env.options`. */
  envOptions: Record<string, unknown>;
  /** Train tasks played (each once per prompt kind). */
  episodes: number;
  /** Sampling temperature (the rollouts'; 0 = greedy). */
  temperature: number;
  maxTurns: number;
  historyLength: number;
  maxNewTokens: number;
  /** Seed of the task draw and the sampling. */
  seed: number;
  signal?: AbortSignal;
}

/** What {@link skillCheck} measured. */
export interface SkillCheckReport {
  episodes: number;
  /** Share won with the ordinary prompt, in [0, 1]. */
  success: number;
  /** Share won with the expert solve's reference skill in every prompt, in [0, 1]. */
  successWithSkill: number;
  /** Lost trajectories with a meaningful reference skill (the ones scored). */
  lostScored: number;
  /** Response tokens of those trajectories. */
  lostTokens: number;
  /**
   * Mean over those tokens of log π(token | prompt + skill) − log π(token | prompt), nats per
   * token (0 when none was scored).
   */
  deltaLost: number;
}

/** Runs the check (see module doc). */
export async function skillCheck(
  text: TextPolicy,
  options: SkillCheckOptions,
): Promise<SkillCheckReport> {
  const { env } = options;
  // The tasks evaluate() draws for its first split with this seed, solved by the expert.
  const splitSeed = (options.seed + 104729) >>> 0;
  const tasks = await env.sampleTasks("train", options.episodes, splitSeed, options.envOptions);
  const skills = new Map<string, string>();
  for (const task of tasks) {
    const skill = await solveSkill(env, task, options);
    if (meaningful(skill)) skills.set(task.id, skill);
  }
  const played = await evaluate(text, {
    env,
    envOptions: options.envOptions,
    splits: ["train"],
    episodes: options.episodes,
    temperature: options.temperature,
    maxTurns: options.maxTurns,
    historyLength: options.historyLength,
    maxNewTokens: options.maxNewTokens,
    seed: options.seed,
    skillFor: (task) => skills.get(task.id) ?? null,
    signal: options.signal,
  });
  const [split] = played.splits;
  // Every turn of every lost trajectory, without and with its own reference skill.
  const plain = [], skilled = [];
  let lostScored = 0;
  for (const t of played.trajectories) {
    if (t.won) continue;
    const skill = (await env.referenceAnalysis(t)).episode_skill;
    if (!meaningful(skill)) continue;
    lostScored++;
    for (const s of t.steps) {
      const response = s.responseIds ?? s.response;
      plain.push(text.sample(s.prompt, response, false, s.images));
      skilled.push(text.sample(insertSkill(s.prompt, skill), response, false, s.images));
    }
  }
  let sum = 0, tokens = 0;
  if (plain.length > 0) {
    const [without, withSkill] = [
      await text.policy.score(plain),
      await text.policy.score(skilled),
    ];
    without.logprobs.forEach((lp, i) => {
      for (let k = 0; k < lp.length; k++) sum += withSkill.logprobs[i][k] - lp[k];
      tokens += lp.length;
    });
  }
  return {
    episodes: split.episodes,
    success: split.success_rate,
    successWithSkill: split.with_skill?.success_rate ?? split.success_rate,
    lostScored,
    lostTokens: tokens,
    deltaLost: tokens > 0 ? sum / tokens : 0,
  };
}

/**
 * The skill of `task`'s skilled demonstration where the environment has one
 * (`env.skilledDemonstration`, the skill the warm-up taught the policy to act on), else the
 * reference skill of the expert's solve ("" when the environment has none).
 */
async function solveSkill(
  env: AsyncEnvironment,
  task: Task,
  options: { envOptions: Record<string, unknown>; maxTurns: number; historyLength: number },
): Promise<string> {
  if (env.skilledDemonstration !== undefined) {
    const demo = await env.skilledDemonstration(task);
    await demo.expert.close();
    return demo.skill;
  }
  const { steps, won } = await expertEpisode(env, task, {
    env,
    envOptions: options.envOptions,
    episodes: 1,
    maxTurns: options.maxTurns,
    historyLength: options.historyLength,
    seed: 0,
  });
  return (await env.referenceAnalysis({ task, steps, won, score: won ? 10 : 0 })).episode_skill;
}
