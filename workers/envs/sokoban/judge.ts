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
    // The reference drops a repeated direction ("up then left", never "up then up").
    slots: {
      pushes: `(?!(?:${DIR} then )*(?<pushrun>${DIR}) then \\k<pushrun>(?![a-z]))` +
        `${DIR}(?: then ${DIR})*`,
    },
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
 * Most push directions a decoded workflow skill may name. The reference analyzer named 2 in 99%
 * of 2,380 won expert and noisy trajectories (6×6, one box) and never more than 4.
 */
export const MAX_PUSH_DIRECTIONS = 6;

/**
 * `d1 then d2 then …`: 1 to `max` directions, never the same one twice in a row (the reference
 * merges consecutive pushes in one direction), each not `previous`. A regular language, written
 * out as a tree of choices (4 · 3^(max−1) leaves).
 */
function pushesPattern(max: number, previous?: string): SkillPattern {
  return {
    oneOf: DIRECTIONS.filter((d) => d !== previous).map((d): SkillPattern =>
      max === 1 ? d : { seq: [d, { oneOf: ["", { seq: [" then ", pushesPattern(max - 1, d)] }] }] }
    ),
  };
}

/**
 * The literal sentences of {@link SOKOBAN_SKILL_GRAMMAR} (the templates' text as the analyzer
 * writes it), for structured generation, split by outcome as analyzeSokoban writes them: `won`
 * the workflow (at most {@link MAX_PUSH_DIRECTIONS} push directions, none twice in a row), `lost`
 * the failure skills. Every sentence is well-formed under the grammar
 * (tests/workers/envs/skill_judge_test.ts).
 */
export const SOKOBAN_SKILL_PATTERNS: SkillPatterns = {
  won: {
    oneOf: [["the box", "the target"], ["each box", "the targets"]].map(([box, target]) =>
      templatePattern(T.workflow, {
        box,
        target,
        pushes: pushesPattern(MAX_PUSH_DIRECTIONS),
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
