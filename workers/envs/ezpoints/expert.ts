/**
 * EZPoints' scripted expert: reads the cards and the formula so far from the observation text
 * (the same in both renders) and enters the next token of a formula that completes it to 12
 * (solver.ts), then `=`. It re-plans whenever the formula is not the one it planned, and
 * submits with `=` when no completion exists (the episode then ends, lost).
 */
import type { Expert, Observation } from "../types.ts";
import { cardValue } from "./cards.ts";
import { parseObservationText } from "./episode.ts";
import { SUBMIT_TOKEN } from "./formula.ts";
import { completeFormula } from "./solver.ts";

/** The expert of one task (any task: it plans from the observation). */
export class EzPointsExpert implements Expert {
  /** The whole formula being entered (without `=`). */
  #plan: string[] | null = null;

  /**
   * The next token.
   * @throws ObservationParseError when the text is not an EZPoints observation.
   */
  act(observation: Observation): string {
    const { hand, tokens } = parseObservationText(observation.text);
    let plan = this.#plan;
    if (plan === null || tokens.length > plan.length || tokens.some((t, i) => t !== plan![i])) {
      const rest = completeFormula(tokens, hand.map((c) => cardValue(c.rank)));
      if (rest === null) return SUBMIT_TOKEN;
      plan = this.#plan = [...tokens, ...rest];
    }
    return plan[tokens.length] ?? SUBMIT_TOKEN;
  }
}
