/** Shared helpers of the household and webshop tests: run a policy or an action list. */
import type { Environment, Observation, Task, Trajectory } from "../../../workers/envs/types.ts";

/** A policy maps the current observation to an action text. */
export type Policy = (observation: Observation) => string;

/** Runs `policy` on a fresh episode of `task` until done or `maxSteps` (default: env's limit). */
export function runPolicy(
  env: Environment,
  task: Task,
  policy: Policy,
  maxSteps = env.defaultMaxTurns,
): Trajectory {
  const episode = env.createEpisode(task);
  let observation = episode.reset();
  const trajectory: Trajectory = { task, steps: [], won: false, score: 0 };
  for (let turn = 0; turn < maxSteps; turn++) {
    const action = policy(observation);
    const result = episode.step(action);
    trajectory.steps.push({
      observation: observation.text,
      response: `<action>${action}</action>`,
      action,
      valid: result.valid,
      reward: result.reward,
    });
    trajectory.score += result.reward;
    observation = result.observation;
    if (result.done) {
      trajectory.won = result.won;
      break;
    }
  }
  return trajectory;
}

/** Plays `actions` in order (stopping early when the episode ends). */
export function runActions(env: Environment, task: Task, actions: readonly string[]): Trajectory {
  let i = 0;
  return runPolicy(env, task, () => actions[i++], actions.length);
}

/** A seeded policy choosing uniformly among the admissible actions (mulberry32). */
export function randomPolicy(seed: number): Policy {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (observation) => {
    const actions = observation.admissibleActions ?? [];
    return actions.length === 0 ? "look" : actions[Math.floor(next() * actions.length)];
  };
}
