/** Test helper: a tiny in-process environment for the rollout and analyze tests. */
import { z } from "zod";
import type {
  Environment,
  Episode,
  Observation,
  PromptInput,
  SkillAnalysis,
  Split,
  StepResult,
  Task,
} from "../../../workers/envs/types.ts";

/**
 * A 1-D corridor: the agent starts in cell 0 and must reach cell `length`. Actions `left` and
 * `right` move (left stops at 0); anything else is invalid and changes nothing. Reaching the end
 * gives reward 10 and ends the episode; every other valid move costs 0.1.
 */
export class Corridor implements Environment {
  readonly id = "corridor";
  readonly description = "Walk right to the end of a corridor.";
  readonly optionsSchema = z.object({ length: z.number().int().min(1).default(2) });
  readonly defaultMaxTurns = 10;
  readonly families = ["corridor"] as const;

  sampleTasks(split: Split, count: number, seed: number): Task[] {
    return Array.from({ length: count }, (_, i) => corridorTask(2 + ((seed + i) % 3), split));
  }

  createEpisode(task: Task): Episode {
    const length = task.options.length as number;
    let position = 0;
    const observe = (): Observation => ({ text: `You are in cell ${position} of ${length}.` });
    return {
      task,
      reset: () => {
        position = 0;
        return observe();
      },
      step: (action: string): StepResult => {
        if (action !== "left" && action !== "right") {
          return {
            observation: observe(),
            reward: 0,
            done: false,
            won: false,
            valid: false,
            info: {},
          };
        }
        position = Math.max(0, position + (action === "right" ? 1 : -1));
        const won = position === length;
        return {
          observation: observe(),
          reward: won ? 10 : -0.1,
          done: won,
          won,
          valid: true,
          info: {},
        };
      },
    };
  }

  buildPrompt(input: PromptInput): string {
    const shown = input.historyLength === 0 ? [] : input.history.slice(-input.historyLength);
    return [
      `Your task is to: ${input.task.instruction}`,
      `History: ${shown.map((s) => s.action || "?").join(",")}`,
      input.observation.text,
      `Now it's your turn (turn ${input.turn}).`,
    ].join("\n");
  }

  parseAction(response: string): string | null {
    return /<action>(.*?)<\/action>/.exec(response)?.[1] ?? null;
  }

  createExpert() {
    return { act: () => "right" };
  }

  referenceAnalysis(): SkillAnalysis {
    return { episode_summary: "", episode_skill: "Always move right." };
  }

  vocabulary(): string[] {
    return ["left", "right"];
  }
}

export function corridorTask(length: number, split: Split = "train"): Task {
  return {
    envId: "corridor",
    id: `corridor/${split}/${length}`,
    split,
    seed: length,
    family: "corridor",
    instruction: `reach cell ${length}`,
    options: { length },
  };
}
