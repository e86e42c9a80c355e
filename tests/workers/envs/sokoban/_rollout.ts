/** Runs whole Sokoban episodes for tests (expert, random and scripted policies). */
import type { Environment, Observation, Task, Trajectory } from "../../../../workers/envs/types.ts";

/** Plays `task` with `policy` for at most `maxTurns` turns; returns the trajectory. */
export function rollout(
  env: Environment,
  task: Task,
  policy: (obs: Observation, turn: number) => string,
  maxTurns = env.defaultMaxTurns,
): Trajectory {
  const episode = env.createEpisode(task);
  let obs = episode.reset();
  const steps: Trajectory["steps"] = [];
  let won = false;
  let score = 0;
  for (let turn = 1; turn <= maxTurns; turn++) {
    const response = policy(obs, turn);
    const action = env.parseAction(response) ?? "";
    const r = episode.step(action);
    steps.push({ observation: obs.text, response, action, valid: r.valid, reward: r.reward });
    score += r.reward;
    obs = r.observation;
    if (r.done) {
      won = r.won;
      break;
    }
  }
  return { task, steps, won, score };
}
