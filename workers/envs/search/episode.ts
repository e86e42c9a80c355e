/**
 * One search-QA episode (Search-R1 style, Jin et al. 2025): the agent answers a question about
 * the generated world by searching its passages. Actions (tags in any case, the closing tag may
 * be left off):
 *
 * - `<search>query</search>`: the top-k passages by BM25 (retrieval.ts) become the observation,
 *   `Results for "query": (1) … (2) … (3) …`, or `No results for "query".`;
 * - `<answer>text</answer>`: ends the episode; reward = token F1 against the gold answer in
 *   [0, 1] (answer.ts), won = exact match after normalisation; `info.score` is the F1.
 *
 * Anything else (an empty query or answer, plain text) is invalid: the turn counts and the
 * observation is `Invalid action. ` before the current one. After `maxTurns` turns without an
 * answer the episode ends with reward 0 (`info.score` 0).
 */
import type { Episode, Observation, StepResult, Task } from "../types.ts";
import { answerF1, exactMatch } from "./answer.ts";
import type { Question } from "./questions.ts";
import { searchPassages } from "./retrieval.ts";
import { WORLD } from "./world.ts";

/** The observation after reset. */
export const START_TEXT = "No search results yet.";
/** The prefix of an invalid action's observation. */
export const INVALID_PREFIX = "Invalid action.";

/** A parsed action: its verb and its argument (whitespace collapsed, non-empty). */
export interface SearchAction {
  verb: "search" | "answer";
  arg: string;
}

/**
 * Parses an action text `<search>query</search>` or `<answer>text</answer>` (the whole text,
 * tags in any case, spaces inside the tag brackets allowed, closing tag optional); null when it
 * is neither or the argument is empty.
 */
export function parseSearchAction(text: string): SearchAction | null {
  const m = /^<\s*(search|answer)\s*>([\s\S]*?)(?:<\s*\/\s*\1\s*>)?$/i.exec(text.trim());
  if (m === null) return null;
  const arg = m[2].replace(/\s+/g, " ").trim();
  if (arg === "" || /<\s*\/?\s*(search|answer)\s*>/i.test(arg)) return null;
  return { verb: m[1].toLowerCase() as SearchAction["verb"], arg };
}

/** The canonical action text of `action`: `<search>query</search>` or `<answer>text</answer>`. */
export function actionText(action: SearchAction): string {
  return `<${action.verb}>${action.arg}</${action.verb}>`;
}

/** Episode settings (from the task's options). */
export interface SearchEpisodeOptions {
  /** Passages shown per search (≥ 1). */
  topK: number;
  /** Turns after which an unanswered episode ends. */
  maxTurns: number;
}

/** What the answer scored. */
export interface AnswerScore {
  text: string;
  exactMatch: boolean;
  /** Token F1 in [0, 1]. */
  f1: number;
}

/** A live search-QA episode; see the module comment. */
export class SearchEpisode implements Episode {
  readonly task: Task;
  readonly question: Question;
  readonly options: SearchEpisodeOptions;
  #turns = 0;
  #done = false;
  #current = START_TEXT;
  #answer: AnswerScore | null = null;

  /** @param question the task's question (questions.ts). */
  constructor(task: Task, question: Question, options: SearchEpisodeOptions) {
    this.task = task;
    this.question = question;
    this.options = options;
  }

  /** Restarts with no results shown. */
  reset(): Observation {
    this.#turns = 0;
    this.#done = false;
    this.#current = START_TEXT;
    this.#answer = null;
    return { text: this.#current };
  }

  /** Applies one action (see the module comment). */
  step(text: string): StepResult {
    if (this.#done) return this.#result(false, "The episode is over.");
    this.#turns++;
    const action = parseSearchAction(text);
    if (action === null) return this.#result(false, `${INVALID_PREFIX} ${this.#current}`);
    if (action.verb === "answer") {
      const gold = this.question.answer;
      this.#answer = {
        text: action.arg,
        exactMatch: exactMatch(action.arg, gold),
        f1: answerF1(action.arg, gold),
      };
      this.#done = true;
      const score = Math.round(this.#answer.f1 * 100);
      const text = `You answered "${action.arg}". Score: ${score}.`;
      return this.#result(true, text, { reward: this.#answer.f1 });
    }
    const retrieved = searchPassages(action.arg, this.options.topK);
    this.#current = retrieved.length === 0
      ? `No results for "${action.arg}".`
      : `Results for "${action.arg}": ${
        retrieved.map((id, i) => `(${i + 1}) ${WORLD.passages[id].text}`).join(" ")
      }`;
    return this.#result(true, this.#current, { retrieved });
  }

  #result(
    valid: boolean,
    text: string,
    extra: { reward?: number; retrieved?: number[] } = {},
  ): StepResult {
    if (this.#turns >= this.options.maxTurns) this.#done = true;
    const info: Record<string, unknown> = { turn: this.#turns };
    if (extra.retrieved !== undefined) info.retrieved = extra.retrieved;
    if (this.#answer !== null) {
      info.score = this.#answer.f1;
      info.exact_match = this.#answer.exactMatch;
      info.f1 = this.#answer.f1;
    } else if (this.#done) {
      info.score = 0;
    }
    const reward = extra.reward ?? 0;
    const won = this.#answer?.exactMatch ?? false;
    return { observation: { text }, reward, done: this.#done, won, valid, info };
  }
}
