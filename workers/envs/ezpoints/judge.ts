/**
 * EZPoints' skill grammar: the `episode_skill` sentences of {@link EZPOINTS_TEMPLATES}, where a
 * `{solution}` slot holds a formula of card numbers (1–10), `+ - * /` and parentheses, one token
 * per word. A skill it accepts is well-formed (workers/envs/skill_judge.ts).
 */
import { alternation, compileSkillGrammar } from "../skill_judge.ts";
import { EZPOINTS_TEMPLATES } from "./analyzer.ts";
import { NUMBER_TOKENS, OPERATOR_TOKENS } from "./formula.ts";

const TOKEN = alternation([...NUMBER_TOKENS, ...OPERATOR_TOKENS, "(", ")"]);
const T = EZPOINTS_TEMPLATES;
const SOLUTION = { solution: `${TOKEN}(?: ${TOKEN})*` };

/** The compiled grammar of EZPoints skills. */
export const EZPOINTS_SKILL_GRAMMAR: readonly RegExp[] = compileSkillGrammar([
  { text: T.sumSkill },
  { text: T.productSkill },
  { text: T.mixedSkill },
  { text: T.tooEarlySkill, slots: SOLUTION },
  { text: T.divisionByZeroSkill, slots: SOLUTION },
  { text: T.wrongValueSkill, slots: SOLUTION },
  { text: T.notOnCardsSkill },
  { text: T.reusedSkill },
  { text: T.misplacedSkill },
  { text: T.unknownSkill },
  { text: T.outOfStepsSkill, slots: SOLUTION },
]);
