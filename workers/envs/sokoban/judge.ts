/**
 * Sokoban's skill grammar: the `episode_skill` sentences of {@link ANALYZER_TEMPLATES} with legal
 * slot values (directions; the one-box or the several-boxes noun phrases together). A skill it
 * accepts is well-formed (workers/envs/skill_judge.ts). {@link SOKOBAN_SKILL_PATTERNS} is the same
 * language as literal text, for decoding skills under it.
 */
import {
  alternation,
  compileSkillGrammar,
  type SkillPattern,
  type SkillPatterns,
  templatePattern,
} from "../skill_judge.ts";
import { ANALYZER_TEMPLATES } from "./analyzer.ts";
import { DIRECTIONS } from "./room.ts";

const DIR = alternation(DIRECTIONS);
const T = ANALYZER_TEMPLATES;

/** The compiled grammar of Sokoban skills. */
export const SOKOBAN_SKILL_GRAMMAR: readonly RegExp[] = compileSkillGrammar([
  // One box ↔ "the box … the target"; several ↔ "each box … the targets" (analyzeSokoban).
  ...[["the box", "the target"], ["each box", "the targets"]].map(([box, target]) => ({
    text: T.workflow.replace("{box}", box).replace("{target}", target),
    slots: { pushes: `${DIR}(?: then ${DIR})*` },
  })),
  { text: T.deadlockSkill, slots: { dir: DIR } },
  { text: T.offTargetSkill },
  { text: T.invalidSkill },
  { text: T.oscillateSkill },
  { text: T.bumpsSkill },
  { text: T.outOfStepsSkill },
]);

/** One direction, as the analyzer writes it. */
const DIR_PATTERN: SkillPattern = { oneOf: DIRECTIONS };

/**
 * The literal sentences of {@link SOKOBAN_SKILL_GRAMMAR} (the templates' text as the analyzer
 * writes it), for structured generation, split by outcome as analyzeSokoban writes them: `won`
 * the workflow, `lost` the failure skills. Every sentence is well-formed under the grammar
 * (tests/workers/envs/skill_judge_test.ts).
 */
export const SOKOBAN_SKILL_PATTERNS: SkillPatterns = {
  won: {
    oneOf: [["the box", "the target"], ["each box", "the targets"]].map(([box, target]) =>
      templatePattern(T.workflow, {
        box,
        target,
        pushes: { repeat: DIR_PATTERN, separator: " then " },
      })
    ),
  },
  lost: {
    oneOf: [
      templatePattern(T.deadlockSkill, { dir: DIR_PATTERN }),
      T.offTargetSkill,
      T.invalidSkill,
      T.oscillateSkill,
      T.bumpsSkill,
      T.outOfStepsSkill,
    ],
  },
};
