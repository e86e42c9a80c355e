/**
 * Real image trajectories for the dump tests: sokoban with `render: "image"` played by a fixed
 * action sequence, each turn keeping the observation image it answered (what a vision policy's
 * rollout records). No model is involved: a text model cannot act on images yet.
 */
import { getEnvironment, type Split } from "../../../../workers/envs/mod.ts";
import type { DumpStep, DumpTrajectory } from "../../../../workers/seed/run/trajectory_dump.ts";

/** `count` sokoban image episodes of `split`, each playing `actions` (until done). */
export function imageTrajectories(
  count: number,
  options: { split?: Split; actions?: string[]; seed?: number } = {},
): DumpTrajectory[] {
  const env = getEnvironment("sokoban");
  const split = options.split ?? "train";
  const tasks = env.sampleTasks(split, count, options.seed ?? 11, { render: "image" });
  return tasks.map((task, b) => {
    const episode = env.createEpisode(task);
    let observation = episode.reset();
    const steps: DumpStep[] = [];
    let won = false, done = false;
    for (const action of options.actions ?? ["up", "left", "down"]) {
      if (done) break;
      const r = episode.step(action);
      steps.push({
        observation: observation.text,
        images: observation.image ? [observation.image] : undefined,
        response: `<action>${action}</action>`,
        action,
        valid: r.valid,
        reward: r.reward,
      });
      observation = r.observation;
      won = r.won;
      done = r.done;
    }
    return {
      id: `${split}/b${b}g0`,
      task,
      taskIndex: b,
      copyIndex: 0,
      won,
      score: steps.reduce((s, x) => s + x.reward, 0),
      truncated: !done,
      steps,
    };
  });
}
