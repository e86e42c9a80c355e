/**
 * The household skill grammar: the `episode_skill` sentences of analyzer.ts. On success the
 * family's workflow rule (`workflowRule`, built here from the analyzer's own function with slot
 * markers for the object and receptacle types); on failure `Avoid this mistake: {mistake}.
 * Instead, {correction}; {workflow rule}.` with one of the analyzer's (mistake, correction) pairs
 * that can occur in that family; for every family, the usual-places skill (`usualPlacesSkill`,
 * {@link USUAL_PLACES_TEXT}). Slots take legal values only: object and receptacle types of the
 * world (objects the family's tool can process, receptacles a task of the family can target),
 * numbered names (`apple 2`, `cabinet 3`), counts; the goal object type is the same wherever it
 * recurs. A skill it accepts is well-formed (workers/envs/skill_judge.ts); the judge (mod.ts)
 * then compares it with the trajectory's true skills, {@link HOUSEHOLD_SET_SLOTS} as sets.
 * {@link householdSkillPatterns} is the same language as literal text (won and lost apart), for
 * decoding skills under it; grammar and pattern are built from the same texts (`familyTexts`) and
 * slot values.
 */
import {
  alternation,
  compileSkillGrammar,
  type SkillPattern,
  type SkillPatterns,
  type SkillTemplate,
} from "../skill_judge.ts";
import { workflowRule } from "./analyzer.ts";
import { CAPABLE, FAMILIES, type Family, ROOMS, type Scenario, TOOLS } from "./world.ts";

const OBJECT_TYPES = [...new Set(Object.values(ROOMS).flatMap((r) => r.objects))];
const RECEPTACLE_TYPES = [
  ...new Set(Object.values(ROOMS).flatMap((r) => [...r.fixed, ...Object.keys(r.optional)])),
];
const OBJ = `${alternation(OBJECT_TYPES)} \\d+`;
const REC = `${alternation(RECEPTACLE_TYPES)} \\d+`;
/** `goalWhere`: every goal-type object and where it starts (needs `o` defined earlier). */
const WHERE = `\\k<o> \\d+ in ${REC}(?: and \\k<o> \\d+ in ${REC})*`;

/** `usualPlacesSkill`'s sentence with `{slot}` markers (`{places}`: `a fridge or a countertop`). */
const USUAL_PLACES_TEXT = "Look for a {o} in {places} first: that is where it usually is.";
const PLACES = `a ${alternation(RECEPTACLE_TYPES)}(?: or a ${alternation(RECEPTACLE_TYPES)})*`;

/** The (mistake, correction) pairs of `diagnose` in analyzer.ts that `family` can produce. */
function mistakePairs(family: Family): [string, string][] {
  const pairs: [string, string][] = [
    [
      "repeated invalid actions: {i} of {n} actions were not admissible",
      "choose only actions from the admissible list",
    ],
    ["took the wrong object: the {obj} instead of a {o}", "take only a {o} ({where})"],
    ...["visited {recsand} but never opened it", "never visited {recsor}"].map((
      why,
    ): [string, string] => [
      `never found a {o}, which was in {where}: it ${why}`,
      "search receptacles not yet visited and open closed ones until a {o} is seen",
    ]),
    ["saw a {o} at {rec} but never took it", "take the {o} as soon as it is seen"],
  ];
  if (family === "examine_in_light") {
    const instead = "take the {o} first ({where}), then use the desklamp";
    pairs.push(
      ["used {lamp} without holding a {o}", instead],
      ["used {lamp} while holding the {obj} instead of a {o}", instead],
      [
        "took the {gobj} but never used the desklamp while holding it",
        "after taking the {o}, go to the desklamp and use it",
      ],
    );
    return pairs;
  }
  pairs.push(
    [
      "took the {gobj} from {rec} after putting it in the {r}",
      "after putting the {o} in the {r}, never take it from the {r}",
    ],
    [
      "put the {gobj} in {rec}, the wrong receptacle, but the task needs a {r}",
      "put the {o} only in a {r}",
    ],
    [
      "took the {gobj} but ran out of steps before putting it in a {r}",
      "go straight to the {r} and put the {o}",
    ],
  );
  const tool = TOOLS[family];
  if (tool !== undefined) {
    pairs.push(
      [
        `forgot to ${tool.verb} the {gobj} before putting it in {rec}`,
        `${tool.verb} the {o} with the ${tool.type} before putting it in the {r}`,
      ],
      [
        `took the {gobj} but never ${tool.verb}ed it with the ${tool.type}`,
        `go to the ${tool.type} and ${tool.verb} the {o} right after taking it`,
      ],
    );
  }
  if (family === "pick_two_and_place") {
    pairs.push([
      "put only one {o} in the {r} and never brought the second one",
      "after the first {o}, fetch another {o} ({where}) and put it too",
    ]);
  }
  return pairs;
}

/**
 * The literal skill texts of `family` with `{slot}` markers: the workflow rule (lowercase, as the
 * failure form ends with it) and the failure prefixes `Avoid this mistake: … Instead, …; ` that
 * precede it. A success skill is the capitalised rule and a period; a failure skill is a prefix,
 * the rule and a period.
 */
function familyTexts(family: Family): { rule: string; failures: string[] } {
  const goal = { family, objectType: "{o}", targetType: "{r}" };
  return {
    rule: workflowRule({ goal } as Scenario),
    failures: mistakePairs(family).map(([mistake, instead]) =>
      `Avoid this mistake: ${mistake}. Instead, ${instead}; `
    ),
  };
}

/** The goal object types of `family` (those its tool can process) and its target types. */
function goalTypes(family: Family): { objects: string[]; targets: string[] } {
  const capable = CAPABLE[family];
  const excluded = new Set(["desklamp", TOOLS[family]?.type ?? ""]);
  return {
    objects: capable ? OBJECT_TYPES.filter((o) => capable.has(o)) : OBJECT_TYPES,
    targets: RECEPTACLE_TYPES.filter((t) => !excluded.has(t)),
  };
}

/** Every skill template of `family` (success rule, then each failure form). */
function familyTemplates(family: Family): SkillTemplate[] {
  const { objects, targets } = goalTypes(family);
  const o = alternation(objects);
  const slots = {
    o,
    r: alternation(targets),
    obj: OBJ,
    gobj: `(?<o>${o}) \\d+`,
    rec: REC,
    lamp: "desklamp \\d+",
    where: WHERE,
    recsand: `${REC}(?: and ${REC})*`,
    recsor: `${REC}(?: or ${REC})*`,
    i: "\\d+",
    n: "\\d+",
  };
  const { rule, failures } = familyTexts(family);
  return [
    { text: `${rule}.`, slots },
    ...failures.map((prefix) => ({ text: `${prefix}${rule}.`, slots })),
  ];
}

/** The compiled grammar of household skills, every family. */
export const HOUSEHOLD_SKILL_GRAMMAR: readonly RegExp[] = compileSkillGrammar([
  ...FAMILIES.flatMap(familyTemplates),
  { text: USUAL_PLACES_TEXT, slots: { o: alternation(OBJECT_TYPES), places: PLACES } },
]);

/**
 * The slots of {@link HOUSEHOLD_SKILL_GRAMMAR} that list a set (slot → separator in normalised
 * text): the goal objects and where they start (`apple 1 in fridge 1 and apple 2 in cabinet 3`),
 * the receptacles visited but never opened, those never visited, the usual places. The judge
 * compares their items in any order.
 */
export const HOUSEHOLD_SET_SLOTS: Readonly<Record<string, string>> = {
  where: " and ",
  recsand: " and ",
  recsor: " or ",
  places: " or ",
};

/** A number as the analyzer writes it (the grammar's `\d+`). */
const NUMBER: SkillPattern = { repeat: { oneOf: [..."0123456789"] } };
const OBJ_PATTERN: SkillPattern = { seq: [{ oneOf: OBJECT_TYPES }, " ", NUMBER] };
const REC_PATTERN: SkillPattern = { seq: [{ oneOf: RECEPTACLE_TYPES }, " ", NUMBER] };

/** The literal slot patterns once the goal object type `o` is known (built once per type). */
const goalSlots = (() => {
  const cache = new Map<string, Record<string, SkillPattern>>();
  return (o: string): Record<string, SkillPattern> => {
    let slots = cache.get(o);
    if (slots === undefined) {
      const gobj: SkillPattern = { seq: [o, " ", NUMBER] };
      slots = {
        o,
        gobj,
        where: { repeat: { seq: [gobj, " in ", REC_PATTERN] }, separator: " and " },
      };
      cache.set(o, slots);
    }
    return slots;
  };
})();

/** Slots that need no goal type. */
const FREE_SLOTS: Readonly<Record<string, SkillPattern>> = {
  obj: OBJ_PATTERN,
  rec: REC_PATTERN,
  lamp: { seq: ["desklamp ", NUMBER] },
  recsand: { repeat: REC_PATTERN, separator: " and " },
  recsor: { repeat: REC_PATTERN, separator: " or " },
  places: { repeat: { seq: ["a ", { oneOf: RECEPTACLE_TYPES }] }, separator: " or " },
  i: NUMBER,
  n: NUMBER,
};

/** The goal type each slot names (`o` or `r`), for the slots that name one. */
const SLOT_NEEDS: Readonly<Record<string, "o" | "r">> = { o: "o", gobj: "o", where: "o", r: "r" };

/**
 * The literal sentences of `texts` (skill texts of one family with `{slot}` markers) under the
 * grammar's back-references: the goal object type (`{o}`, `{gobj}`, `{where}`) and the target
 * type (`{r}`) are chosen where a text first names them and stay fixed to its end. The choice is
 * spelled out from that point on, and a rest of text that several texts share (the workflow rule
 * they all end with) is one pattern object for each choice, so the pattern is a graph of size
 * ~(texts × object types + object types × target types) × text length, not their product.
 */
function boundPattern(
  texts: readonly string[],
  types: { o: readonly string[]; r: readonly string[] },
): SkillPattern {
  const memo = new Map<string, SkillPattern>();
  const rest = (pieces: readonly string[], bound: { o?: string; r?: string }): SkillPattern => {
    const parts: SkillPattern[] = [];
    for (let i = 0; i < pieces.length; i++) {
      const slot = /^\{([a-z0-9]+)\}$/.exec(pieces[i])?.[1];
      if (slot === undefined) {
        if (pieces[i] !== "") parts.push(pieces[i]);
        continue;
      }
      const needs = SLOT_NEEDS[slot];
      if (needs === undefined) {
        if (!(slot in FREE_SLOTS)) {
          throw new RangeError(
            `Cannot build the household skill pattern as slot {${slot}} must have a pattern: current text is ${
              pieces.join("")
            }`,
          );
        }
        parts.push(FREE_SLOTS[slot]);
        continue;
      }
      const value = bound[needs];
      if (value !== undefined) {
        parts.push(needs === "r" ? value : goalSlots(value)[slot]);
        continue;
      }
      // first mention of a goal type: one branch per type, each sharing its rest of text
      const tail = pieces.slice(i);
      const key = `${tail.join("")}\u0000${bound.o ?? ""}\u0000${bound.r ?? ""}`;
      let choice = memo.get(key);
      if (choice === undefined) {
        choice = { oneOf: types[needs].map((v) => rest(tail, { ...bound, [needs]: v })) };
        memo.set(key, choice);
      }
      parts.push(choice);
      break;
    }
    return parts.length === 1 ? parts[0] : { seq: parts };
  };
  return { oneOf: texts.map((text) => rest(text.split(/(\{[a-z0-9]+\})/), {})) };
}

let skillPatterns: SkillPatterns | undefined;

/**
 * The literal sentences of {@link HOUSEHOLD_SKILL_GRAMMAR} (the analyzer's text, case and
 * punctuation as written), for structured generation: a success skill is the capitalised workflow
 * rule and a period, a failure skill a failure prefix, the rule and a period. The grammar's
 * back-references (the goal object type and the target type recur) are not regular, so each
 * family's sentences are spelled out per goal object type and target type (see `boundPattern`);
 * every sentence is well-formed under the grammar (tests/workers/envs/skill_judge_test.ts). `won`
 * holds the success skills, `lost` the failure skills; both hold the usual-places skill, which the
 * reference writes won or lost. Built on first use (~90 ms) and the same object after (compiled
 * automata are cached per pattern object).
 */
export function householdSkillPatterns(): SkillPatterns {
  if (skillPatterns === undefined) {
    const won: SkillPattern[] = [], lost: SkillPattern[] = [];
    for (const family of FAMILIES) {
      const { objects, targets } = goalTypes(family);
      const { rule, failures } = familyTexts(family);
      const capitalized = rule.charAt(0).toUpperCase() + rule.slice(1);
      const types = { o: objects, r: targets };
      won.push(boundPattern([`${capitalized}.`], types));
      lost.push(boundPattern(failures.map((prefix) => `${prefix}${rule}.`), types));
    }
    const usual = boundPattern([USUAL_PLACES_TEXT], { o: OBJECT_TYPES, r: [] });
    won.push(usual);
    lost.push(usual);
    skillPatterns = { won: { oneOf: won }, lost: { oneOf: lost } };
  }
  return skillPatterns;
}
