/**
 * The household skill grammar: the `episode_skill` sentences of analyzer.ts. On success the
 * family's workflow rule (`workflowRule`, built here from the analyzer's own function with slot
 * markers for the object and receptacle types); on failure `Avoid this mistake: {mistake}.
 * Instead, {correction}; {workflow rule}.` with one of the analyzer's (mistake, correction) pairs
 * that can occur in that family. Slots take legal values only: object and receptacle types of the
 * world (objects the family's tool can process, receptacles a task of the family can target),
 * numbered names (`apple 2`, `cabinet 3`), counts; the goal object type is the same wherever it
 * recurs. A skill it accepts is well-formed (workers/envs/skill_judge.ts).
 */
import { alternation, compileSkillGrammar, type SkillTemplate } from "../skill_judge.ts";
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

/** Every skill template of `family` (success rule, then each failure form). */
function familyTemplates(family: Family): SkillTemplate[] {
  const capable = CAPABLE[family];
  const objects = capable ? OBJECT_TYPES.filter((o) => capable.has(o)) : OBJECT_TYPES;
  const excluded = new Set(["desklamp", TOOLS[family]?.type ?? ""]);
  const o = alternation(objects);
  const slots = {
    o,
    r: alternation(RECEPTACLE_TYPES.filter((t) => !excluded.has(t))),
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
  const goal = { family, objectType: "{o}", targetType: "{r}" };
  const rule = workflowRule({ goal } as Scenario);
  return [
    { text: `${rule}.`, slots },
    ...mistakePairs(family).map(([mistake, instead]) => ({
      text: `Avoid this mistake: ${mistake}. Instead, ${instead}; ${rule}.`,
      slots,
    })),
  ];
}

/** The compiled grammar of household skills, every family. */
export const HOUSEHOLD_SKILL_GRAMMAR: readonly RegExp[] = compileSkillGrammar(
  FAMILIES.flatMap(familyTemplates),
);
