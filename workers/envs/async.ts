/**
 * Wraps a synchronous {@link Environment} as an {@link AsyncEnvironment}, so the pipeline uses
 * one Promise-based interface for built-in and HTTP environments alike.
 */
import { z } from "zod";
import type {
  AsyncEnvironment,
  AsyncEpisode,
  AsyncExpert,
  Environment,
  Observation,
  PromptInput,
  Split,
  StepResult,
  Task,
  Trajectory,
} from "./types.ts";

/**
 * The async view of `env`. Every method runs the sync one; errors it throws become rejections
 * (so `EnvOptionsError` reaches callers the same way as from a remote environment).
 */
export function toAsyncEnvironment(env: Environment): AsyncEnvironment {
  const jsonSchema = z.toJSONSchema(env.optionsSchema, { io: "input" }) as Record<string, unknown>;
  const view: AsyncEnvironment = {
    id: env.id,
    description: env.description,
    optionsJsonSchema: jsonSchema,
    defaultMaxTurns: env.defaultMaxTurns,
    families: env.families,
    sampleTasks(split: Split, count: number, seed: number, options?: Record<string, unknown>) {
      return Promise.resolve().then(() => env.sampleTasks(split, count, seed, options));
    },
    createEpisode(task: Task): AsyncEpisode {
      const episode = env.createEpisode(task);
      return {
        task: episode.task,
        reset: (): Promise<Observation> => Promise.resolve().then(() => episode.reset()),
        step: (actionText: string): Promise<StepResult> =>
          Promise.resolve().then(() => episode.step(actionText)),
        close: () => Promise.resolve(),
      };
    },
    buildPrompt: (input: PromptInput) => Promise.resolve().then(() => env.buildPrompt(input)),
    parseAction: (response: string) => Promise.resolve().then(() => env.parseAction(response)),
    createExpert(task: Task): AsyncExpert {
      const expert = env.createExpert(task);
      return {
        act: (observation: Observation) => Promise.resolve().then(() => expert.act(observation)),
        close: () => Promise.resolve(),
      };
    },
    referenceAnalysis: (trajectory: Trajectory) =>
      Promise.resolve().then(() => env.referenceAnalysis(trajectory)),
    vocabulary: () => Promise.resolve().then(() => env.vocabulary()),
    ...(env.skilledDemonstration
      ? {
        skilledDemonstration: (task: Task) =>
          Promise.resolve().then(() => {
            const { skill, expert } = env.skilledDemonstration!(task);
            return {
              skill,
              expert: {
                act: (observation: Observation) =>
                  Promise.resolve().then(() => expert.act(observation)),
                close: () => Promise.resolve(),
              },
            };
          }),
      }
      : {}),
    ...(env.judgeSkill
      ? {
        judgeSkill: (trajectory: Trajectory, skill: string) =>
          Promise.resolve().then(() => env.judgeSkill!(trajectory, skill)),
      }
      : {}),
  };
  // read on use (not copied): an environment may build its pattern lazily (household's ~90 ms)
  if ("skillPatterns" in env) {
    Object.defineProperty(view, "skillPatterns", {
      get: () => env.skillPatterns,
      enumerable: true,
    });
  }
  return view;
}
