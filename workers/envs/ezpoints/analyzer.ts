/**
 * EZPoints' reference analyzer: replays a trajectory's actions on its hand and writes a truthful
 * skill. Success → the kind of formula that worked (sum, product or mixed). Failure → the core
 * mistake, checked in this order: the submitted formula was incomplete (`=` too early), divided
 * by zero, or had another value (with a formula that does make 12 from these cards); without a
 * submission, the first inadmissible token (a number on no card, a number used twice, a token out
 * of place, not a token at all); else running out of steps. Every sentence comes from
 * {@link EZPOINTS_TEMPLATES}, so the vocabulary is known in advance.
 */
import type { SkillAnalysis, StepResult, Trajectory } from "../types.ts";
import { type Card, cardValue } from "./cards.ts";
import { EzPointsEpisode } from "./episode.ts";
import {
  evaluateFormula,
  formulaText,
  type Fraction,
  fractionText,
  OPERATOR_TOKENS,
  SUBMIT_TOKEN,
  tokensOfFormulaText,
} from "./formula.ts";
import { completeFormula } from "./solver.ts";

/** Sentence templates; `{name}` slots take numbers, tokens and formulas. */
export const EZPOINTS_TEMPLATES = {
  solved: "Solved in {n} steps: {formula} = 12.",
  sumSkill:
    "When the card values add up to 12, enter them joined by + one token per turn, then finish with =; J, Q and K count as 10.",
  productSkill:
    "When the card values multiply to 12, enter them joined by * one token per turn, then finish with =; J, Q and K count as 10.",
  mixedSkill:
    "Combine the card values with + - * / and parentheses until the formula equals exactly 12, enter it one token per turn, then finish with =.",
  tooEarly: "Failed: entered = at step {k} before the formula {formula} was complete.",
  tooEarlySkill:
    "Enter = only after every card's number is in the formula and every ( is closed; with these cards {solution} makes 12.",
  divisionByZero: "Failed: the formula {formula} divides by zero.",
  divisionByZeroSkill:
    "Never divide by a part that equals 0; with these cards {solution} makes 12.",
  wrongValue: "Failed: the formula {formula} equals {value}, not 12.",
  wrongValueSkill: "Work out the value before entering =; with these cards {solution} makes 12.",
  notOnCards: "Failed: at step {k} entered {token}, which is not the number of any card.",
  notOnCardsSkill: "Enter only the numbers on the cards: A is 1, and J, Q and K are 10.",
  reused: "Failed: at step {k} entered {token} again, but each card is used exactly once.",
  reusedSkill: "Use each card's number exactly once; check which cards are already in the formula.",
  misplaced: "Failed: at step {k} {token} could not follow the formula {formula}.",
  misplacedSkill:
    "Alternate numbers and operators: start with a number or (, put an operator after each number, and close every ( after a number.",
  unknown: "Failed: at step {k} the action was not a number, operator, parenthesis or =.",
  unknownSkill: "Answer with exactly one token: a card number, + - * /, ( or ), or = to finish.",
  outOfSteps: "Failed: ran out of steps before entering =; the formula was {formula}.",
  outOfStepsSkill:
    "Enter = as soon as the formula uses every card; with these cards {solution} makes 12.",
} as const;

/** Phrases {@link valueWords} uses for values whose numbers would leave the vocabulary. */
const VALUE_PHRASES = ["more than 100", "less than -100", "about"];

/**
 * A formula value in words the vocabulary holds (numbers 0–100): exact (`7`, `-4`, `7/5`) when
 * numerator and denominator are at most 100 in size, else `more than 100`, `less than -100` or
 * `about 83` (rounded).
 */
export function valueWords(value: Fraction): string {
  if (Math.abs(value.n) <= 100 && value.d <= 100) return fractionText(value);
  const v = value.n / value.d;
  if (v > 100) return VALUE_PHRASES[0];
  if (v < -100) return VALUE_PHRASES[1];
  return `${VALUE_PHRASES[2]} ${Math.round(v)}`;
}

/** The value of a submitted formula that the episode accepted as well formed. */
function submittedValue(formula: string, values: readonly number[]): Fraction {
  const r = evaluateFormula(tokensOfFormulaText(formula), values);
  if (!r.ok) throw new RangeError(`Cannot value formula ${formula} as it must be well formed`);
  return r.value;
}

function fill(template: string, slots: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (_, k: string) => String(slots[k]));
}

/** One replayed step: the token and what the episode said. */
interface Replayed {
  token: string;
  result: StepResult;
  /** The formula before this step. */
  before: string;
}

/**
 * The reference skill of a finished EZPoints trajectory on `hand` (the task's cards). Pure and
 * deterministic; the trajectory's actions are replayed, its observation texts are not read.
 */
export function analyzeEzPoints(hand: readonly Card[], trajectory: Trajectory): SkillAnalysis {
  const episode = new EzPointsEpisode(trajectory.task, hand, "text");
  let formula = formulaText([]);
  episode.reset();
  const steps: Replayed[] = [];
  for (const step of trajectory.steps) {
    const result = episode.step(step.action);
    steps.push({ token: step.action.trim(), result, before: formula });
    formula = String(result.info.formula);
    if (result.done) break;
  }
  const values = hand.map((c) => cardValue(c.rank));
  const solution = (completeFormula([], values) ?? []).join(" ");
  const last = steps[steps.length - 1];
  const n = steps.length;
  if (last?.result.won) {
    const used = formula.split(" ").filter((t) => t !== SUBMIT_TOKEN);
    const ops = new Set(used.filter((t) => (OPERATOR_TOKENS as readonly string[]).includes(t)));
    const onlyPlus = ops.size === 1 && ops.has("+") && !used.includes("(");
    const onlyTimes = ops.size === 1 && ops.has("*") && !used.includes("(");
    return {
      episode_summary: fill(EZPOINTS_TEMPLATES.solved, { n, formula: used.join(" ") }),
      episode_skill: onlyPlus
        ? EZPOINTS_TEMPLATES.sumSkill
        : onlyTimes
        ? EZPOINTS_TEMPLATES.productSkill
        : EZPOINTS_TEMPLATES.mixedSkill,
    };
  }
  if (last?.result.done && last.token === SUBMIT_TOKEN) {
    const submitted = last.before;
    const error = last.result.info.error;
    if (error === "division_by_zero") {
      return {
        episode_summary: fill(EZPOINTS_TEMPLATES.divisionByZero, { formula: submitted }),
        episode_skill: fill(EZPOINTS_TEMPLATES.divisionByZeroSkill, { solution }),
      };
    }
    if (error !== undefined) {
      return {
        episode_summary: fill(EZPOINTS_TEMPLATES.tooEarly, { k: n, formula: submitted }),
        episode_skill: fill(EZPOINTS_TEMPLATES.tooEarlySkill, { solution }),
      };
    }
    return {
      episode_summary: fill(EZPOINTS_TEMPLATES.wrongValue, {
        formula: submitted,
        value: valueWords(submittedValue(submitted, values)),
      }),
      episode_skill: fill(EZPOINTS_TEMPLATES.wrongValueSkill, { solution }),
    };
  }
  const k = steps.findIndex((s) => !s.result.valid);
  if (k >= 0) {
    const s = steps[k];
    const slots = { k: k + 1, token: s.token, formula: s.before };
    switch (s.result.info.error) {
      case "number_not_on_cards":
        return {
          episode_summary: fill(EZPOINTS_TEMPLATES.notOnCards, slots),
          episode_skill: EZPOINTS_TEMPLATES.notOnCardsSkill,
        };
      case "number_reused":
        return {
          episode_summary: fill(EZPOINTS_TEMPLATES.reused, slots),
          episode_skill: EZPOINTS_TEMPLATES.reusedSkill,
        };
      case "misplaced":
        return {
          episode_summary: fill(EZPOINTS_TEMPLATES.misplaced, slots),
          episode_skill: EZPOINTS_TEMPLATES.misplacedSkill,
        };
      default:
        return {
          episode_summary: fill(EZPOINTS_TEMPLATES.unknown, slots),
          episode_skill: EZPOINTS_TEMPLATES.unknownSkill,
        };
    }
  }
  return {
    episode_summary: fill(EZPOINTS_TEMPLATES.outOfSteps, { formula }),
    episode_skill: fill(EZPOINTS_TEMPLATES.outOfStepsSkill, { solution }),
  };
}

/** Every text the analyzer can emit, with slots removed (for the vocabulary). */
export function ezpointsAnalyzerTexts(): string[] {
  return [
    ...Object.values(EZPOINTS_TEMPLATES).map((t) => t.replace(/\{\w+\}/g, " ")),
    ...VALUE_PHRASES,
  ];
}
