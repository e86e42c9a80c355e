/**
 * The built-in `ezpoints` environment: RL4VLM's gym-cards EZPoints, a vision task. The image
 * shows playing cards; the agent writes, one token per turn, a formula that uses each card's
 * number exactly once (A is 1; J, Q and K count as 10) and equals 12, then submits it with `=`.
 * Rules and rewards: episode.ts; cards and splits: cards.ts; the picture: render.ts.
 *
 * Options: `render` (`image`, default: observations carry the card image and the policy prompt
 * shows `<image>` plus the formula so far; `text`: the cards are named in the prompt, for
 * text-only policies and tests), `cards` (2–4, default 2 as RL4VLM). The observation text is the
 * same in both renders (cards named, then the formula): it is what the analyzer and the expert
 * read. Task ids name split, cards and render: `ezpoints/train/2c-image/{seed}`.
 */
import { z } from "zod";
import { checkSampleArgs, InvalidTaskError, parseEnvOptions } from "../errors.ts";
import {
  buildTurnPrompt,
  parseActionText,
  promptTemplateVocabulary,
  vocabularyOf,
  withImagePlaceholder,
} from "../prompt.ts";
import type { Environment, PromptInput, Split, Task, Trajectory } from "../types.ts";
import { seedOf } from "../_rng.ts";
import { analyzeEzPoints, ezpointsAnalyzerTexts } from "./analyzer.ts";
import { judgeWithGrammar } from "../skill_judge.ts";
import { EZPOINTS_SKILL_GRAMMAR } from "./judge.ts";
import {
  type Card,
  cardValue,
  dealHand,
  FAMILIES,
  familyOf,
  HAND_SIZE,
  RANK_NAMES,
  SUITS,
} from "./cards.ts";
import { CARDS_PREFIX, EzPointsEpisode, FORMULA_PREFIX } from "./episode.ts";
import { EzPointsExpert } from "./expert.ts";
import { ALL_TOKENS, formulaText } from "./formula.ts";

/** Options of `ezpoints` (validated where they enter; defaults filled). */
export const ezpointsOptionsSchema = z.strictObject({
  /** `image`: observations carry the card image (the vision task); `text`: cards named only. */
  render: z.enum(["image", "text"]).default("image"),
  /** Cards per hand. */
  cards: z.number().int().min(HAND_SIZE.min).max(HAND_SIZE.max).default(2),
});

/** Parsed `ezpoints` options. */
export type EzPointsOptions = z.infer<typeof ezpointsOptionsSchema>;

const RULES =
  "Build, one token per turn, a formula that uses each card's number exactly once and equals " +
  "12. Tokens are the numbers 1 to 10, + - * / ( ) and = to finish.";

/** The world description of the vision variant (first prompt line). */
export const EZPOINTS_IMAGE_SYSTEM_LINE =
  `You play EZPoints: the image shows playing cards; A counts as 1 and J, Q and K count as 10. ${RULES}`;

/** The world description of the text variant (first prompt line). */
export const EZPOINTS_TEXT_SYSTEM_LINE =
  `You play EZPoints: the observation names playing cards; ace counts as 1 and jack, queen and ` +
  `king count as 10. ${RULES}`;

/** The task instruction. */
export const EZPOINTS_INSTRUCTION = "build a formula from the numbers on the cards that equals 12";

/**
 * Default turn limit: the longest formula the expert writes for 4 cards, 11 tokens and `=`, with
 * room for a few invalid tokens (2 cards need 4 turns).
 */
export const EZPOINTS_MAX_TURNS = 16;

/** The hand of a task (dealt again from its seed, split and options). */
function handOf(task: Task): { hand: Card[]; options: EzPointsOptions } {
  if (task.envId !== "ezpoints") {
    throw new InvalidTaskError(
      `Cannot use task ${task.id} as its envId must be ezpoints: current value is ${task.envId}`,
    );
  }
  const options = parseEnvOptions("ezpoints", ezpointsOptionsSchema, task.options);
  return { hand: dealHand(task.seed, task.split, options.cards), options };
}

/** The part of an observation text the card image does not show: the formula line. */
function keptText(observationText: string): string {
  return observationText.split("\n").slice(1).join("\n");
}

/** The built-in EZPoints environment. */
export const ezpointsEnvironment: Environment = {
  id: "ezpoints",
  description:
    "EZPoints (RL4VLM gym-cards), a vision task: the image shows playing cards (2 by default; " +
    "A is 1, J, Q, K are 10); write, one token per turn, a formula that uses each card's " +
    "number once and equals 12, then =. Tokens: 1-10, + - * / ( ) =. Reward +10 for a correct " +
    "formula, -1 for a wrong submission or an inadmissible token. Option render: text names " +
    "the cards instead of showing them.",
  optionsSchema: ezpointsOptionsSchema,
  defaultMaxTurns: EZPOINTS_MAX_TURNS,
  families: FAMILIES,
  splitDescriptions: {
    train: "Hands of the training rank combinations (only solvable hands are dealt).",
    test_seen: "New deals, with other seeds, of the training rank combinations.",
    test_unseen:
      "Held-out rank combinations never dealt in training (2 cards: 2 and 6; about 20% with 3 " +
      "or 4 cards), of ranks and formula kinds that training does show.",
  },

  sampleTasks(
    split: Split,
    count: number,
    seed: number,
    options?: Record<string, unknown>,
  ): Task[] {
    checkSampleArgs(split, count, seed);
    const opts = parseEnvOptions("ezpoints", ezpointsOptionsSchema, options);
    const tasks: Task[] = [];
    for (let i = 0; i < count; i++) {
      const taskSeed = seedOf("ezpoints", split, seed, i);
      const hand = dealHand(taskSeed, split, opts.cards);
      tasks.push({
        envId: "ezpoints",
        id: `ezpoints/${split}/${opts.cards}c-${opts.render}/${taskSeed}`,
        split,
        seed: taskSeed,
        family: familyOf(hand.map((c) => cardValue(c.rank))),
        instruction: EZPOINTS_INSTRUCTION,
        options: { ...opts },
      });
    }
    return tasks;
  },

  createEpisode(task: Task): EzPointsEpisode {
    const { hand, options } = handOf(task);
    return new EzPointsEpisode(task, hand, options.render);
  },

  buildPrompt(input: PromptInput): string {
    const { options } = handOf(input.task);
    if (options.render === "image") {
      return buildTurnPrompt({ systemLine: EZPOINTS_IMAGE_SYSTEM_LINE, ...input, keptText });
    }
    return buildTurnPrompt({ systemLine: EZPOINTS_TEXT_SYSTEM_LINE, ...input });
  },

  parseAction(response: string): string | null {
    return parseActionText(response);
  },

  createExpert(_task: Task): EzPointsExpert {
    return new EzPointsExpert();
  },

  referenceAnalysis(trajectory: Trajectory) {
    return analyzeEzPoints(handOf(trajectory.task).hand, trajectory);
  },

  judgeSkill(trajectory: Trajectory, skill: string) {
    const reference = analyzeEzPoints(handOf(trajectory.task).hand, trajectory);
    return judgeWithGrammar(EZPOINTS_SKILL_GRAMMAR, skill, reference.episode_skill);
  },

  vocabulary(): string[] {
    return withImagePlaceholder(vocabularyOf([
      ...promptTemplateVocabulary(100),
      EZPOINTS_IMAGE_SYSTEM_LINE,
      EZPOINTS_TEXT_SYSTEM_LINE,
      EZPOINTS_INSTRUCTION,
      CARDS_PREFIX,
      FORMULA_PREFIX,
      formulaText([]),
      "of",
      ...RANK_NAMES,
      ...SUITS,
      ...ALL_TOKENS,
      ...ezpointsAnalyzerTexts(),
    ]));
  },
};
