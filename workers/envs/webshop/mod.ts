/**
 * `webshop`: a WebShop-style shopping environment (Yao et al. 2022) over a generated catalog of
 * 1,152 products. The agent searches (`search[query]`), pages through results, opens an item,
 * selects options (`click[blue]`) and buys (`click[buy now]`); the episode's reward is
 * WebShop's attribute/option/price score in [0, 1] (see goal.ts), success when it is 1.
 * `test_unseen` asks only for product types never asked for in `train`/`test_seen`.
 */
import { z } from "zod";
import {
  buildTurnPrompt,
  parseActionText,
  promptTemplateVocabulary,
  vocabularyOf,
} from "../prompt.ts";
import { InvalidTaskError, parseEnvOptions } from "../errors.ts";
import type { Environment, PromptInput, Split, Task, Trajectory } from "../types.ts";
import { hash32 } from "../_rng.ts";
import { BRANDS, CATALOG, CATEGORIES, OPTION_VALUES, UNSEEN_TYPES } from "./catalog.ts";
import { generateGoal, type Goal, INSTRUCTION_WORDS } from "./goal.ts";
import { SEARCH_ACTION, WEBSHOP_MAX_TURNS, WebshopEpisode } from "./episode.ts";
import { WebshopExpert } from "./expert.ts";
import { analyzeWebshop } from "./analyzer.ts";
import { judgeWithGrammar } from "../skill_judge.ts";
import { WEBSHOP_SKILL_GRAMMAR } from "./judge.ts";

export { WEBSHOP_MAX_TURNS, WebshopEpisode } from "./episode.ts";
export { computeReward, type Goal, type RewardBreakdown } from "./goal.ts";
export { CATALOG, type Product, UNSEEN_TYPES } from "./catalog.ts";
export { searchCatalog } from "./search.ts";

/** Options of `webshop`: none yet (unknown keys are rejected). */
export const webshopOptionsSchema = z.object({}).strict();

/** Task families of `webshop`: the product categories. */
export const WEBSHOP_FAMILIES: readonly string[] = Object.keys(CATEGORIES);

/**
 * The goal of a webshop task; a pure function of the task's seed and split.
 * @throws InvalidTaskError when the task is not a webshop task; EnvOptionsError on bad options.
 */
export function webshopGoal(task: Task): Goal {
  if (task.envId !== "webshop") {
    throw new InvalidTaskError(
      `Cannot create a webshop episode as task.envId must be "webshop": current value is ${
        JSON.stringify(task.envId)
      }`,
    );
  }
  parseEnvOptions("webshop", webshopOptionsSchema, task.options);
  return generateGoal(task.seed, task.split);
}

function sampleTasks(
  split: Split,
  count: number,
  seed: number,
  options?: Record<string, unknown>,
): Task[] {
  const parsed = parseEnvOptions("webshop", webshopOptionsSchema, options);
  return Array.from({ length: Math.max(0, count) }, (_, i) => {
    const taskSeed = hash32(`webshop/${split}/${seed}/${i}`);
    const goal = generateGoal(taskSeed, split);
    return {
      envId: "webshop",
      id: `webshop/${split}/${taskSeed}`,
      split,
      seed: taskSeed,
      family: goal.category,
      instruction: goal.instruction,
      options: parsed,
    };
  });
}

const SYSTEM_LINE = "You are an expert agent shopping on a website for the item described.";
const FORMAT_HINT = "Actions look like search[red shoes] or click[item 1].";

function buildPrompt(input: PromptInput): string {
  return buildTurnPrompt({ systemLine: SYSTEM_LINE, formatHint: FORMAT_HINT, ...input });
}

/** Fixed wording of pages and reference analyses. */
const PHRASES = [
  SYSTEM_LINE,
  FORMAT_HINT,
  SEARCH_ACTION,
  "Search page. Type search[your query]. Invalid action. The episode is over.",
  "click[back to search] click[< prev] click[next >] click[item ] click[buy now]",
  'No results for "". Results for "", page of : [item ] $;',
  "Item: . Price: $. Features: , . : [] Selected: none. You bought an item. Score: .",
  'Success in steps: searched "", opened item , at dollars, a with and , selected and,',
  "and bought it. Failure after steps: bought (score ); Warning signs: invalid actions,",
  "searches, result pages turned. Avoid this mistake: . Instead, To to buy",
  "a that is and , with , at most dollars: search for , open an item whose title is a",
  "with features and price at most dollars, click[] and , then click[buy now]",
  "bought a instead of a. the item bought is not. did not select. selected instead of",
  "paid dollars, over the budget of dollars. never searched and never bought anything",
  "searched but never opened an item, and never bought",
  "opened items but never clicked buy now before the steps ran out",
];

function buildVocabulary(): string[] {
  const words: string[] = [...BRANDS, ...INSTRUCTION_WORDS, ...PHRASES];
  for (const [category, spec] of Object.entries(CATEGORIES)) {
    words.push(category, ...spec.attributes, ...Object.keys(spec.types));
  }
  for (const [dim, values] of Object.entries(OPTION_VALUES)) words.push(dim, ...values);
  return vocabularyOf([...promptTemplateVocabulary(200), ...words]);
}

const VOCABULARY = buildVocabulary();

/** The `webshop` environment (see the module comment). */
export const webshopEnvironment: Environment = {
  id: "webshop",
  description: `WebShop-style shopping over a generated catalog of ${CATALOG.length} products ` +
    "in 36 product types: search[query], page through results, open an item, click[option], " +
    "click[buy now]. Reward is WebShop's score: type match times the share of goal " +
    "attributes, options and price bound satisfied; success when it is 1. test_unseen asks " +
    `for the product types ${[...UNSEEN_TYPES].join(", ")}, never asked for in training.`,
  optionsSchema: webshopOptionsSchema as unknown as z.ZodType<Record<string, unknown>>,
  defaultMaxTurns: WEBSHOP_MAX_TURNS,
  families: WEBSHOP_FAMILIES,
  splitDescriptions: {
    train: "goals for 30 product types",
    test_seen: "new goals for the training product types",
    test_unseen: "goals for 6 held-out product types (one per category)",
  },
  sampleTasks,
  createEpisode: (task) => new WebshopEpisode(task, webshopGoal(task), WEBSHOP_MAX_TURNS),
  buildPrompt,
  parseAction: (response) => parseActionText(response),
  createExpert: (task) => new WebshopExpert(task, webshopGoal(task)),
  referenceAnalysis: webshopReference,
  judgeSkill: (trajectory: Trajectory, skill: string) =>
    judgeWithGrammar(WEBSHOP_SKILL_GRAMMAR, skill, webshopReference(trajectory).episode_skill),
  vocabulary: () => [...VOCABULARY],
};

/** The reference analysis of a finished trajectory (replayed on a fresh episode of its task). */
function webshopReference(trajectory: Trajectory) {
  const episode = new WebshopEpisode(
    trajectory.task,
    webshopGoal(trajectory.task),
    WEBSHOP_MAX_TURNS,
  );
  return analyzeWebshop(trajectory, episode);
}
