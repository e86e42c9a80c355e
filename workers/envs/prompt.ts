/**
 * The shared turn prompt (verl-agent style), lenient action parsing and the vocabulary helper.
 *
 * Prompt layout (one item per line; every built-in environment uses it):
 *
 * ```
 * {systemLine}
 * Your task is to: {instruction}                   ← SEED inserts the skill block after this line
 * Prior to this step, you have already taken N step(s). Below are the most recent K
 *   observations and the corresponding actions you took:          (only when there is history)
 * [Observation i: {text}, Action i: {action}]                     (K lines, oldest first)
 * You are now at step N+1 and your current observation is: {text}
 * Your admissible actions of the current situation are: [a, b, …].   (when the env has them)
 * Now it's your turn to take an action. {formatHint} Answer with <action>…</action>, …
 * ```
 *
 * A multi-line observation (a Sokoban grid) starts on the line after its label.
 *
 * Vision variants (an environment with image observations passes `keptText`): the current
 * observation shows as {@link IMAGE_PLACEHOLDER} — one image per prompt, the current one — followed
 * on the next line by the part of its text the image does not show (EZPoints' formula); history
 * entries show only that kept part, `[Observation i: {kept}, Action i: {action}]`, or
 * `[Action i: {action}]` when the image showed everything (Sokoban). Observation texts themselves
 * stay full descriptions (the analyzer reads them); only the policy prompt swaps in the image.
 *
 * The wording follows verl-agent's ALFWorld/Sokoban templates, shortened: a ~1M-parameter model
 * trains on these prompts on CPU, and with the word-level tokenizer every word is one token.
 */
import type { Observation, Task, TrajectoryStep } from "./types.ts";

/** The task line prefix; the SEED trainer finds the task line by it. */
export const TASK_LINE_PREFIX = "Your task is to: ";

/** The first words of the final line of every turn prompt. */
export const TURN_LINE_PREFIX = "Now it's your turn to take an action.";

/** Where the policy prompt of a vision variant shows the current observation's image. */
export const IMAGE_PLACEHOLDER = "<image>";

/** Responses without `<action>` tags are accepted whole only when at most this long (chars). */
export const MAX_UNTAGGED_ACTION_CHARS = 100;

/** Inputs of {@link buildTurnPrompt}. */
export interface TurnPromptInput {
  /** One line describing the world and its symbols (no newline). */
  systemLine: string;
  task: Task;
  /** Earlier steps of this episode, oldest first; only the last `historyLength` are shown. */
  history: readonly TrajectoryStep[];
  observation: Observation;
  /** Steps of history to show (≥ 0). */
  historyLength: number;
  /** Current turn, 1-based (the step about to be taken). */
  turn: number;
  /** Optional sentence about the action format, e.g. `Actions look like search[red shoes].` */
  formatHint?: string;
  /**
   * Vision variants only: the part of an observation text that the image does not show, kept as
   * text (`""` when the image shows everything). When set, an observation with an image shows as
   * {@link IMAGE_PLACEHOLDER} plus its kept text, and every history entry shows only its kept text.
   */
  keptText?: (observationText: string) => string;
}

/**
 * Inputs of {@link buildCompactPrompt}: {@link TurnPromptInput} without the system line and hint.
 */
export type CompactPromptInput = Omit<TurnPromptInput, "systemLine" | "formatHint">;

/**
 * The compact turn prompt for small models trained from scratch: the task line (SEED inserts the
 * skill block after it, as in the full prompt), the shown history as `[Observation i: …, Action
 * i: …]` lines, then the current observation text; no system line, no step count, no admissible
 * actions and no format instruction (a model trained from scratch learns the answer format from
 * the expert demonstrations). About a third of the tokens of {@link buildTurnPrompt} for Sokoban
 * (66 vs 190 for a 6×6 room with relative positions): with builtin:tiny, policy SFT on the
 * compact prompt leaves the format-only loss plateau after ~300 optimizer steps, on the full prompt
 * it did not within 450 (the SFT probe in bench/RESULTS.md; workers/envs/workers/envs/README.md,
 * "Sokoban for small models").
 * @throws PromptInputError on the same malformed inputs as {@link buildTurnPrompt}.
 */
export function buildCompactPrompt(input: CompactPromptInput): string {
  checkPromptInput({ ...input, systemLine: "" });
  const { task, history, observation, historyLength } = input;
  const lines = [TASK_LINE_PREFIX + oneLine(task.instruction)];
  const shown = historyLength > 0 ? history.slice(-historyLength) : [];
  const first = input.turn - shown.length;
  lines.push(...historyLines(shown, first, input.keptText));
  lines.push(currentText(observation, input.keptText));
  return lines.join("\n");
}

/** Thrown when a prompt input is malformed (negative history length, turn < 1, …). */
export class PromptInputError extends Error {
  /** @param message "Cannot build prompt as X must be Y: current value is V". */
  constructor(message: string) {
    super(message);
    this.name = "PromptInputError";
  }
}

/**
 * Builds one turn's prompt in the layout shown at the top of this file.
 *
 * `turn` sets the numbers: `turn - 1` steps were taken, and the shown history entries are the
 * steps just before `turn` (so with `turn` 6 and `historyLength` 2 the lines are
 * `[Observation 4: …]` and `[Observation 5: …]`). `history` may be the whole episode so far or
 * only its latest steps.
 * An action that could not be parsed shows as `(none)`.
 * @throws PromptInputError when `historyLength < 0`, `turn < 1`, `history` is longer than
 *   `turn - 1`, or `systemLine` has a newline.
 */
export function buildTurnPrompt(input: TurnPromptInput): string {
  checkPromptInput(input);
  const { systemLine, task, history, observation, historyLength, turn, formatHint, keptText } =
    input;
  const lines = [systemLine, TASK_LINE_PREFIX + oneLine(task.instruction)];
  const shown = historyLength > 0 ? history.slice(-historyLength) : [];
  if (shown.length > 0) {
    const taken = turn - 1;
    const first = turn - shown.length;
    lines.push(
      `Prior to this step, you have already taken ${taken} step(s). Below are the most recent ` +
        `${shown.length} observations and the corresponding actions you took:`,
    );
    lines.push(...historyLines(shown, first, keptText));
  }
  lines.push(
    `You are now at step ${history.length + 1} and your current observation is:${
      block(currentText(observation, keptText))
    }`,
  );
  if (observation.admissibleActions !== undefined && observation.admissibleActions.length > 0) {
    lines.push(
      `Your admissible actions of the current situation are: [${
        observation.admissibleActions.join(", ")
      }].`,
    );
  }
  const hint = formatHint ? ` ${oneLine(formatHint)}` : "";
  lines.push(
    `${TURN_LINE_PREFIX}${hint} Answer with <action>your action</action>, ` +
      `optionally after <think>your reasoning</think>.`,
  );
  return lines.join("\n");
}

/** Options of {@link parseActionText}. */
export interface ParseActionOptions {
  /** Lowercase the result (for case-insensitive environments). Default `true`. */
  lowercase?: boolean;
}

/**
 * Extracts the action from a policy response, leniently and deterministically:
 *
 * 1. With an `<action>` tag (case-insensitive, spaces allowed inside the brackets): the text
 *    after the LAST opening tag, up to the next `</action>` or the end (a missing closing tag is
 *    tolerated).
 * 2. Without one: complete `<think>…</think>` blocks are removed; the rest is accepted when it is
 *    a single line of at most {@link MAX_UNTAGGED_ACTION_CHARS} characters with no `<tag>` left.
 *
 * The result has whitespace runs collapsed to one space, is trimmed, and lowercased unless
 * `lowercase: false`. Returns `null` when nothing usable remains (empty content, long prose,
 * only an unclosed `<think>`).
 */
export function parseActionText(
  response: string,
  options: ParseActionOptions = {},
): string | null {
  const lowercase = options.lowercase ?? true;
  const finish = (text: string): string | null => {
    const collapsed = text.replace(/\s+/g, " ").trim();
    if (collapsed === "") return null;
    return lowercase ? collapsed.toLowerCase() : collapsed;
  };
  const openTag = /<\s*action\s*>/gi;
  let lastEnd = -1;
  for (const m of response.matchAll(openTag)) lastEnd = m.index + m[0].length;
  if (lastEnd >= 0) {
    const rest = response.slice(lastEnd);
    const close = rest.search(/<\s*\/\s*action\s*>/i);
    return finish(close >= 0 ? rest.slice(0, close) : rest);
  }
  const withoutThink = response.replace(/<\s*think\s*>[\s\S]*?<\s*\/\s*think\s*>/gi, "").trim();
  if (withoutThink.includes("\n")) return null;
  if (withoutThink.length > MAX_UNTAGGED_ACTION_CHARS) return null;
  if (/<\s*\/?\s*[a-z]+\s*>/i.test(withoutThink)) return null;
  return finish(withoutThink);
}

/** Word pattern shared by every vocabulary: runs of letters, or runs of decimal digits. */
export const WORD_PATTERN = /\p{L}+|\p{Nd}+/gu;

/**
 * The sorted, de-duplicated words of `texts`: runs of letters (any script, case kept) and runs
 * of decimal digits. Everything else (spaces, punctuation, symbols such as `#`, `_`, `√`) is not
 * a word: the tokenizer covers it with its byte fallback. `"it's step 12."` → `it`, `s`, `step`,
 * `12`. Sorted by UTF-16 code units, so the result is the same on every machine.
 */
export function vocabularyOf(texts: Iterable<string>): string[] {
  const words = new Set<string>();
  for (const text of texts) {
    for (const m of text.matchAll(WORD_PATTERN)) words.add(m[0]);
  }
  return [...words].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * `words` plus {@link IMAGE_PLACEHOLDER} itself (as one entry, so a tokenizer built from the
 * vocabulary can give it one token) and its word `image`; sorted and de-duplicated like
 * {@link vocabularyOf}. Every vision environment's vocabulary goes through this.
 */
export function withImagePlaceholder(words: readonly string[]): string[] {
  const all = new Set([...words, IMAGE_PLACEHOLDER, ...vocabularyOf([IMAGE_PLACEHOLDER])]);
  return [...all].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The words of one text in order (same pattern as {@link vocabularyOf}); for prompt budgets. */
export function wordsOf(text: string): string[] {
  return [...text.matchAll(WORD_PATTERN)].map((m) => m[0]);
}

/**
 * The words every prompt built by {@link buildTurnPrompt} can contain besides env text, with the
 * step numbers `0`…`maxNumber` (digit runs are words, so each number an env can show is one).
 */
export function promptTemplateVocabulary(maxNumber = 100): string[] {
  const numbers = Array.from({ length: maxNumber + 1 }, (_, i) => String(i));
  return vocabularyOf([
    ...numbers,
    TASK_LINE_PREFIX,
    TURN_LINE_PREFIX,
    "Prior to this step, you have already taken step(s). Below are the most recent " +
    "observations and the corresponding actions you took:",
    "[Observation : , Action : ] (none)",
    "You are now at step and your current observation is:",
    "Your admissible actions of the current situation are: [].",
    "Answer with <action>your action</action>, optionally after <think>your reasoning</think>.",
  ]);
}

/** @throws PromptInputError on the malformed inputs listed at {@link buildTurnPrompt}. */
function checkPromptInput(input: TurnPromptInput): void {
  const { systemLine, history, historyLength, turn } = input;
  if (!Number.isInteger(historyLength) || historyLength < 0) {
    throw new PromptInputError(
      `Cannot build prompt as historyLength must be an integer >= 0: current value is ${historyLength}`,
    );
  }
  if (!Number.isInteger(turn) || turn < 1) {
    throw new PromptInputError(
      `Cannot build prompt as turn must be an integer >= 1: current value is ${turn}`,
    );
  }
  if (history.length > turn - 1) {
    throw new PromptInputError(
      `Cannot build prompt as history must hold at most turn - 1 = ${turn - 1} steps: ` +
        `current value is ${history.length}`,
    );
  }
  if (systemLine.includes("\n")) {
    throw new PromptInputError(
      `Cannot build prompt as systemLine must be one line: current value is ${
        JSON.stringify(systemLine)
      }`,
    );
  }
}

/**
 * `[Observation n: …, Action n: …]` (or `[Action n: …]`, see module doc) per shown step from
 * `first`.
 */
function historyLines(
  shown: readonly TrajectoryStep[],
  first: number,
  keptText: TurnPromptInput["keptText"],
): string[] {
  return shown.map((step, i) => {
    const n = first + i;
    const action = step.action === "" ? "(none)" : step.action;
    const shownText = keptText === undefined ? step.observation : keptText(step.observation);
    return keptText !== undefined && shownText === ""
      ? `[Action ${n}: ${action}]`
      : `[Observation ${n}:${block(shownText)}, Action ${n}: ${action}]`;
  });
}

/**
 * The current observation as the prompt shows it: the image placeholder plus kept text, or the
 * text.
 */
function currentText(
  observation: Observation,
  keptText: ((text: string) => string) | undefined,
): string {
  if (keptText === undefined || observation.image === undefined) return observation.text;
  const kept = keptText(observation.text);
  return kept === "" ? IMAGE_PLACEHOLDER : `${IMAGE_PLACEHOLDER}\n${kept}`;
}

/** A multi-line text (a grid) starts on its own line; a one-line text follows a space. */
function block(text: string): string {
  return text.includes("\n") ? `\n${text}` : ` ${text}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}
