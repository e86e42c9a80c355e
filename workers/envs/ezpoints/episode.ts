/**
 * A live EZPoints episode (RL4VLM gym-cards EZPoints, generalised to − ÷ and parentheses).
 *
 * The agent writes a formula one token per turn: a card number (`1`…`10`; A is 1, J, Q, K are
 * 10), `+ - * /`, `(`, `)`, or `=`, which submits the formula and ends the episode.
 * Rewards (as RL4VLM's EZPoints): +10 when `=` submits a formula that uses every card's number
 * exactly once and equals 12 exactly (won); −1 when `=` submits anything else (incomplete,
 * unbalanced, dividing by zero, or another value; lost, episode over); −1 for a token that is not
 * admissible now (unknown, a number on no card or already used, an operator where a number is
 * due, …), which leaves the formula unchanged (invalid, the episode goes on); 0 for every other
 * token. RL4VLM appends a blank for an illegal token and stops at 5 tokens; here the turn limit
 * (`max_turns`) ends a formula that never gets its `=`.
 *
 * Observation text (both renders): `Cards: 5 of hearts, king of spades.` then
 * `Current formula: 5 +` (`(empty)` at first). With `render: "image"` the image shows the cards.
 */
import type { Episode, Observation, StepResult, Task } from "../types.ts";
import { EpisodeNotStartedError, ObservationParseError } from "../errors.ts";
import { type Card, cardFromName, cardName, cardValue, HAND_SIZE } from "./cards.ts";
import {
  admissibleTokens,
  evaluateFormula,
  formulaText,
  fractionText,
  SUBMIT_TOKEN,
  tokensOfFormulaText,
  whyInadmissible,
} from "./formula.ts";
import { renderCardsImage } from "./render.ts";
import { TARGET } from "./solver.ts";

/** Reward for submitting a correct formula. */
export const CORRECT_REWARD = 10;
/** Reward for submitting a wrong or incomplete formula. */
export const WRONG_REWARD = -1;
/** Reward for a token that is not admissible (the formula is unchanged). */
export const INVALID_REWARD = -1;

/** Prefix of the observation's first line. */
export const CARDS_PREFIX = "Cards: ";
/** Prefix of the observation's second line. */
export const FORMULA_PREFIX = "Current formula: ";

/** The observation text of `hand` with formula `tokens`. */
export function observationText(hand: readonly Card[], tokens: readonly string[]): string {
  return `${CARDS_PREFIX}${hand.map(cardName).join(", ")}.\n${FORMULA_PREFIX}${
    formulaText(tokens)
  }`;
}

/**
 * Most tokens an observation's formula can hold: an episode only appends admissible tokens (each
 * card once, an operator between numbers, at most cards − 1 open parentheses), far below this.
 */
export const MAX_FORMULA_TOKENS = 64;

/**
 * Reads an observation text written by {@link observationText} back into hand and tokens.
 * @throws ObservationParseError when the lines or card names do not match, the hand is not
 *   {@link HAND_SIZE} cards or the formula has more than {@link MAX_FORMULA_TOKENS} tokens.
 */
export function parseObservationText(text: string): { hand: Card[]; tokens: string[] } {
  const [cardsLine, formulaLine] = text.split("\n");
  if (!cardsLine?.startsWith(CARDS_PREFIX) || !formulaLine?.startsWith(FORMULA_PREFIX)) {
    throw new ObservationParseError(
      `Cannot parse observation as it must have a "${CARDS_PREFIX}" and a "${FORMULA_PREFIX}" ` +
        `line: current value is ${JSON.stringify(text.slice(0, 200))}`,
    );
  }
  const names = cardsLine.slice(CARDS_PREFIX.length).replace(/\.$/, "").split(",");
  const hand = names.map((name) => {
    const card = cardFromName(name);
    if (card === null) {
      throw new ObservationParseError(
        `Cannot parse observation as each card must read "rank of suit": current value is ${name}`,
      );
    }
    return card;
  });
  // Bounds before anyone searches the hand: the expert's solver is exponential in the cards (7
  // cards took minutes), and the formula parser recurses once per parenthesis.
  if (hand.length < HAND_SIZE.min || hand.length > HAND_SIZE.max) {
    throw new ObservationParseError(
      `Cannot parse observation as it must show ${HAND_SIZE.min} to ${HAND_SIZE.max} cards: current value is ${hand.length}`,
    );
  }
  const tokens = tokensOfFormulaText(formulaLine.slice(FORMULA_PREFIX.length));
  if (tokens.length > MAX_FORMULA_TOKENS) {
    throw new ObservationParseError(
      `Cannot parse observation as its formula must have at most ${MAX_FORMULA_TOKENS} tokens: current value is ${tokens.length}`,
    );
  }
  return { hand, tokens };
}

/** The token an action text names: the text without surrounding whitespace. */
export function tokenOf(actionText: string): string {
  return actionText.trim();
}

/** One EZPoints episode; see the module doc for rules and rewards. */
export class EzPointsEpisode implements Episode {
  readonly task: Task;
  readonly #hand: readonly Card[];
  readonly #values: readonly number[];
  readonly #render: "text" | "image";
  #tokens: string[] | null = null;
  #done = false;
  #won = false;

  /** @param task the task; @param hand its cards; @param render `image` adds the card image. */
  constructor(task: Task, hand: readonly Card[], render: "text" | "image") {
    this.task = task;
    this.#hand = hand;
    this.#values = hand.map((c) => cardValue(c.rank));
    this.#render = render;
  }

  /** An empty formula. */
  reset(): Observation {
    this.#tokens = [];
    this.#done = false;
    this.#won = false;
    return this.#observe();
  }

  /**
   * Appends one token, or submits with `=`; see the module doc for rewards.
   * @throws EpisodeNotStartedError before `reset()`.
   */
  step(actionText: string): StepResult {
    if (this.#tokens === null) throw new EpisodeNotStartedError(this.task.id);
    const tokens = this.#tokens;
    const token = tokenOf(actionText);
    if (this.#done) return this.#result(0, false, { error: "episode_over" });
    const reason = whyInadmissible(tokens, token, this.#values);
    if (reason !== null) return this.#result(INVALID_REWARD, false, { error: reason });
    if (token !== SUBMIT_TOKEN) {
      tokens.push(token);
      return this.#result(0, true, {});
    }
    const outcome = evaluateFormula(tokens, this.#values);
    tokens.push(SUBMIT_TOKEN);
    this.#done = true;
    if (!outcome.ok) return this.#result(WRONG_REWARD, true, { error: outcome.error });
    this.#won = outcome.value.d === 1 && outcome.value.n === TARGET;
    const value = fractionText(outcome.value);
    return this.#result(this.#won ? CORRECT_REWARD : WRONG_REWARD, true, { value });
  }

  #result(reward: number, valid: boolean, extra: Record<string, unknown>): StepResult {
    return {
      observation: this.#observe(),
      reward,
      done: this.#done,
      won: this.#won,
      valid,
      info: { ...extra, formula: formulaText(this.#tokens!) },
    };
  }

  #observe(): Observation {
    const tokens = this.#tokens!;
    const observation: Observation = {
      text: observationText(this.#hand, tokens),
      admissibleActions: this.#done ? [] : admissibleTokens(tokens, this.#values),
    };
    if (this.#render === "image") observation.image = renderCardsImage(this.#hand);
    return observation;
  }
}
