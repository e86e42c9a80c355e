/**
 * `search`: search-augmented question answering (Search-R1, Jin et al. 2025; the third task
 * family of the SEED authors' code beside ALFWorld and WebShop) over a generated corpus of 3,560
 * one-sentence passages about fictional people, cities, countries, companies, novels and films
 * (world.ts). The agent writes `<search>query</search>` to see the top-k passages by BM25 and
 * `<answer>text</answer>` to finish; the score is token F1 against the gold answer, success its
 * exact match after normalisation (episode.ts, answer.ts).
 *
 * Questions (questions.ts): `single_hop`, `bridge` (two hops through a bridge entity) and
 * `comparison` (which of two was first). `test_unseen` asks about held-out relation types
 * (`mentor`, `director`, `release_year`) that `train` and `test_seen` never ask about;
 * `test_seen` asks about subjects `train` never asks about.
 *
 * Options: `families` (default all three), `top_k` passages per search (1–5, default 3),
 * `max_turns` (3–16, default 4 as the authors' launcher: the episode ends unanswered after it),
 * `prompt` (`full`, the verl-agent turn prompt, or `compact`: task line, history and observation,
 * for builtin:tiny). Task ids name the split and, when not all families are drawn, the families:
 * `search/train/{seed}`, `search/train/bridge+comparison/{seed}`.
 */
import { z } from "zod";
import { checkSampleArgs, InvalidTaskError, parseEnvOptions } from "../errors.ts";
import {
  buildCompactPrompt,
  buildTurnPrompt,
  parseActionText,
  promptTemplateVocabulary,
  vocabularyOf,
} from "../prompt.ts";
import type { Environment, PromptInput, Split, Task, Trajectory } from "../types.ts";
import { seedOf } from "../_rng.ts";
import { ANALYZER_PHRASES, analyzeSearch } from "./analyzer.ts";
import {
  actionText,
  INVALID_PREFIX,
  parseSearchAction,
  SearchEpisode,
  START_TEXT,
} from "./episode.ts";
import { SearchExpert } from "./expert.ts";
import {
  generateQuestion,
  HELD_OUT_RELATIONS,
  type Question,
  QUESTION_FAMILIES,
  type QuestionFamily,
  RELATIONS,
} from "./questions.ts";
import { WORLD } from "./world.ts";

export { answerF1, exactMatch, normalizeAnswer } from "./answer.ts";
export { parseSearchAction, SearchEpisode } from "./episode.ts";
export {
  generateQuestion,
  HELD_OUT_RELATIONS,
  isTestSeenSubject,
  type Question,
  QUESTION_FAMILIES,
  type QuestionFamily,
  relationsOf,
} from "./questions.ts";
export { searchPassages } from "./retrieval.ts";
export { type Relation, WORLD } from "./world.ts";

/** Default turn limit (the SEED authors' launcher gives search tasks 4 turns). */
export const SEARCH_MAX_TURNS = 4;

/** Options of `search` (strict: an unknown key is an error; defaults filled). */
export const searchOptionsSchema = z.strictObject({
  /** Question families to draw, uniformly. */
  families: z.array(z.enum(QUESTION_FAMILIES as [QuestionFamily, ...QuestionFamily[]])).min(1)
    .default([...QUESTION_FAMILIES]),
  /** Passages shown per search. */
  top_k: z.number().int().min(1).max(5).default(3),
  /** Turns after which an unanswered episode ends (the expert needs at most 3). */
  max_turns: z.number().int().min(3).max(16).default(SEARCH_MAX_TURNS),
  /** `full`: the verl-agent turn prompt; `compact`: task line, history and observation only. */
  prompt: z.enum(["full", "compact"]).default("full"),
});

/** Parsed `search` options. */
export type SearchOptions = z.infer<typeof searchOptionsSchema>;

/** The world description, first line of the full prompt. */
export const SEARCH_SYSTEM_LINE =
  "You answer questions about a fictional world by searching its encyclopedia passages.";

/** The action format sentence of the full prompt. */
export const SEARCH_FORMAT_HINT =
  "Write <search>your query</search> to see the top passages or <answer>your answer</answer> " +
  "to finish.";

/** The instruction's words before the question. */
export const INSTRUCTION_PREFIX = "answer the question: ";

const questionCache = new Map<string, { question: Question; options: SearchOptions }>();

/**
 * The question of a task and its parsed options (regenerated from its seed; cached).
 * @throws InvalidTaskError when the task is not a search task; EnvOptionsError on bad options.
 */
export function searchQuestion(task: Task): { question: Question; options: SearchOptions } {
  if (task.envId !== "search") {
    throw new InvalidTaskError(
      `Cannot use task ${task.id} as its envId must be search: current value is ${task.envId}`,
    );
  }
  const options = parseEnvOptions("search", searchOptionsSchema, task.options);
  const key = `${task.split}/${task.seed}/${options.families.join("+")}`;
  let cached = questionCache.get(key);
  if (cached === undefined) {
    cached = { question: generateQuestion(task.seed, task.split, options.families), options };
    if (questionCache.size >= 4096) questionCache.delete(questionCache.keys().next().value!);
    questionCache.set(key, cached);
  }
  return { question: cached.question, options };
}

function sampleTasks(
  split: Split,
  count: number,
  seed: number,
  options?: Record<string, unknown>,
): Task[] {
  checkSampleArgs(split, count, seed);
  const opts = parseEnvOptions("search", searchOptionsSchema, options);
  const allFamilies = QUESTION_FAMILIES.every((f) => opts.families.includes(f));
  const segment = allFamilies ? "" : `${[...new Set(opts.families)].join("+")}/`;
  return Array.from({ length: count }, (_, i) => {
    const taskSeed = seedOf("search", split, seed, i);
    const question = generateQuestion(taskSeed, split, opts.families);
    return {
      envId: "search",
      id: `search/${split}/${segment}${taskSeed}`,
      split,
      seed: taskSeed,
      family: question.family,
      instruction: INSTRUCTION_PREFIX + question.text,
      options: { ...opts, families: [...opts.families] },
    };
  });
}

/**
 * Extracts the action from a response: the last `<search>…</search>` or `<answer>…</answer>`
 * (closing tag optional), looked for inside the last `<action>…</action>` when there is one
 * (the pipeline's format, `<action><search>…</search></action>`), else in the response with its
 * `<think>` blocks removed (Search-R1's format). Returns the canonical `<search>q</search>` /
 * `<answer>a</answer>` with case kept and whitespace collapsed; without such a tag, the plain
 * action text (`parseActionText`, case kept), which the episode will reject; null when empty.
 */
export function parseSearchResponse(response: string): string | null {
  const inAction = /<\s*action\s*>/i.test(response);
  const text = inAction
    ? parseActionText(response, { lowercase: false }) ?? ""
    : response.replace(/<\s*think\s*>[\s\S]*?<\s*\/\s*think\s*>/gi, "");
  const tags = [
    ...text.matchAll(
      /<\s*(search|answer)\s*>([\s\S]*?)(?:<\s*\/\s*\1\s*>|(?=<\s*(?:search|answer)\s*>)|$)/gi,
    ),
  ];
  for (const m of tags.reverse()) {
    const action = parseSearchAction(`<${m[1]}>${m[2]}</${m[1]}>`);
    if (action !== null) return actionText(action);
  }
  return parseActionText(response, { lowercase: false });
}

function buildPrompt(input: PromptInput): string {
  const { options } = searchQuestion(input.task);
  if (options.prompt === "compact") return buildCompactPrompt(input);
  return buildTurnPrompt({
    systemLine: SEARCH_SYSTEM_LINE,
    formatHint: SEARCH_FORMAT_HINT,
    ...input,
  });
}

function buildVocabulary(): string[] {
  const templates = Object.values(RELATIONS).flatMap((r) => [
    r.question,
    r.phrase ?? "",
    r.compare ?? "",
    r.statement,
    r.keyword,
  ]);
  return vocabularyOf([
    ...promptTemplateVocabulary(100),
    SEARCH_SYSTEM_LINE,
    SEARCH_FORMAT_HINT,
    INSTRUCTION_PREFIX,
    START_TEXT,
    INVALID_PREFIX,
    'Results for "": (1) No results for "". You answered "". Score: . The episode is over.',
    "<search></search> <answer></answer>",
    ...templates,
    ...WORLD.entities.map((e) => e.name),
    ...WORLD.passages.map((p) => p.text),
    ...ANALYZER_PHRASES,
  ]);
}

const VOCABULARY = buildVocabulary();

/** The `search` environment (see the module comment). */
export const searchEnvironment: Environment = {
  id: "search",
  description: "Search-augmented question answering (Search-R1 style) over a generated " +
    `encyclopedia of ${WORLD.passages.length} one-sentence passages about fictional people, ` +
    "cities, countries, companies, novels and films: <search>query</search> shows the top-k " +
    "passages by BM25, <answer>text</answer> ends the episode. Single-hop, bridge (two-hop) and " +
    "comparison questions; reward is the answer's token F1, success its exact match after " +
    "normalising case, punctuation and articles. 4 turns by default. test_unseen asks about the " +
    `relation types ${[...HELD_OUT_RELATIONS].join(", ")}, never asked about in training.`,
  optionsSchema: searchOptionsSchema as unknown as z.ZodType<Record<string, unknown>>,
  defaultMaxTurns: SEARCH_MAX_TURNS,
  families: QUESTION_FAMILIES,
  splitDescriptions: {
    train: "Questions about subjects of the training half, over 11 relation types.",
    test_seen: "Questions over the same relation types about subjects train never asks about.",
    test_unseen: "Questions that each use a held-out relation type (mentor, director, " +
      "release_year) never asked about in train or test_seen.",
  },
  sampleTasks,
  createEpisode(task: Task): SearchEpisode {
    const { question, options } = searchQuestion(task);
    return new SearchEpisode(task, question, { topK: options.top_k, maxTurns: options.max_turns });
  },
  buildPrompt,
  parseAction: parseSearchResponse,
  createExpert: (task) => new SearchExpert(searchQuestion(task).question),
  referenceAnalysis(trajectory: Trajectory) {
    return analyzeSearch(
      trajectory,
      searchEnvironment.createEpisode(trajectory.task) as SearchEpisode,
    );
  },
  vocabulary: () => [...VOCABULARY],
};
