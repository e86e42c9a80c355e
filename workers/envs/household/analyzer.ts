/**
 * The household reference analyzer: replays a finished trajectory in a fresh episode of its task
 * (the simulator is deterministic) and states what really happened — on success the workflow
 * with the actual objects and receptacles, on failure the actual mistake and its warning signs.
 */
import type { SkillAnalysis, Trajectory } from "../types.ts";
import { goalReached, HouseholdEpisode, typeOf } from "./episode.ts";
import type { Scenario } from "./world.ts";
import { TOOLS, usualPlaceTypes } from "./world.ts";

/** What a replay of a trajectory shows. */
export interface ReplayFacts {
  /** Receptacle → number of `go to` visits, in first-visit order. */
  visits: Map<string, number>;
  /** Receptacle where an object of the goal type was first seen, or null. */
  seenGoalAt: string | null;
  /** Goal-type objects taken, in order. */
  tookGoal: string[];
  /** Other objects taken, in order. */
  tookOther: string[];
  /** Goal-type objects processed (cleaned/heated/cooled) with the family's tool, and where. */
  processed: { obj: string; with: string }[];
  /** Receptacles opened at least once. */
  opened: Set<string>;
  /** Every `put`: object and receptacle, in order. */
  puts: { obj: string; into: string }[];
  /**
   * Goal-type objects taken back out of a receptacle of the target type they had been put in and
   * not in one at the end (the goal check counts only where objects are then), with where from.
   */
  tookBack: { obj: string; from: string }[];
  /** Each desklamp use: the lamp and the object held (or null). */
  lampUses: { lamp: string; held: string | null }[];
  invalid: number;
  steps: number;
  won: boolean;
}

/** Replays `actions` from the scenario's initial state and collects {@link ReplayFacts}. */
export function replay(
  episode: HouseholdEpisode,
  actions: readonly string[],
): ReplayFacts {
  const { goal } = episode.scenario;
  const facts: ReplayFacts = {
    visits: new Map(),
    seenGoalAt: null,
    tookGoal: [],
    tookOther: [],
    processed: [],
    opened: new Set(),
    puts: [],
    tookBack: [],
    lampUses: [],
    invalid: 0,
    steps: 0,
    won: false,
  };
  const seenPattern = new RegExp(`\\ba ${goal.objectType} \\d+`);
  const tool = TOOLS[goal.family];
  episode.reset();
  for (const action of actions) {
    const heldBefore = episode.state.held;
    const result = episode.step(action);
    facts.steps++;
    if (!result.valid) {
      facts.invalid++;
      if (result.done) break;
      continue;
    }
    const words = action.toLowerCase().trim().replace(/\s+/g, " ");
    const at = episode.state.location;
    if (words.startsWith("go to ") && at !== null) {
      facts.visits.set(at, (facts.visits.get(at) ?? 0) + 1);
    }
    if (facts.seenGoalAt === null && at !== null && seenPattern.test(result.observation.text)) {
      facts.seenGoalAt = at;
    }
    const held = episode.state.held;
    if (words.startsWith("take ") && held !== null) {
      (typeOf(held) === goal.objectType ? facts.tookGoal : facts.tookOther).push(held);
      if (
        at !== null && typeOf(at) === goal.targetType &&
        facts.puts.some((p) => p.obj === held && p.into === at)
      ) facts.tookBack.push({ obj: held, from: at });
    }
    if (words.startsWith("put ") && heldBefore !== null && at !== null) {
      facts.puts.push({ obj: heldBefore, into: at });
    }
    if (
      tool !== undefined && words.startsWith(`${tool.verb} `) && heldBefore !== null &&
      typeOf(heldBefore) === goal.objectType
    ) {
      facts.processed.push({ obj: heldBefore, with: at ?? tool.type });
    }
    if (words.startsWith("open ") && at !== null) facts.opened.add(at);
    if (words.startsWith("use ") && at !== null) facts.lampUses.push({ lamp: at, held });
    if (result.done) break;
  }
  facts.tookBack = facts.tookBack.filter(({ obj }, i, all) => {
    const end = episode.state.objectAt.get(obj);
    return all.findIndex((t) => t.obj === obj) === i &&
      !(end !== undefined && end !== "hand" && typeOf(end) === goal.targetType);
  });
  facts.won = goalReached(goal, episode.state);
  return facts;
}

function startOf(scenario: Scenario, obj: string): string {
  return scenario.objects.find((o) => o.name === obj)?.location ?? "an unknown place";
}

function goalWhere(scenario: Scenario): string {
  const places = scenario.objects.filter((o) => o.type === scenario.goal.objectType)
    .map((o) => `${o.name} in ${o.location}`);
  return places.join(" and ");
}

/** The general, policy-facing rule of a family with the actual names filled in. */
export function workflowRule(scenario: Scenario): string {
  const { goal } = scenario;
  const o = goal.objectType;
  const r = goal.targetType;
  const tool = TOOLS[goal.family];
  switch (goal.family) {
    case "examine_in_light":
      return `to look at a ${o} under the desklamp: find and take the ${o} first, then go to ` +
        `the desklamp and use it while holding the ${o}`;
    case "pick_two_and_place":
      return `to put two ${o} in ${r}: take one ${o} at a time, go to the ${r} (open it if ` +
        `closed) and put it, then fetch the second ${o} and put it in the same ${r}`;
    case "pick_and_place":
      return `to put a ${o} in ${r}: find the ${o} (open closed receptacles to look inside), ` +
        `take it, go to the ${r} (open it if closed) and put it`;
    default:
      return `to put a ${tool.adjective} ${o} in ${r}: take the ${o}, go to the ${tool.type}, ` +
        `${tool.verb} the ${o} with the ${tool.type}, then go to the ${r} and put it`;
  }
}

/**
 * The skill that states where the goal object type usually is (world.ts `usualPlaceTypes`):
 * `Look for a {o} in {places} first: that is where it usually is.`, places as `a fridge or a
 * countertop`. It holds across every task of that object type in that room kind, unlike where
 * one episode's objects are; it names the usual places whether or not this layout has them.
 */
export function usualPlacesSkill(scenario: Scenario): string {
  const places = usualPlaceTypes(scenario).map((t) => `a ${t}`).join(" or ");
  return `Look for a ${scenario.goal.objectType} in ${places} first: that is where it usually is.`;
}

function successSummary(scenario: Scenario, facts: ReplayFacts): string {
  const { goal } = scenario;
  const tool = TOOLS[goal.family];
  const parts: string[] = [];
  for (const obj of facts.tookGoal) {
    const put = facts.puts.find((p) => p.obj === obj && typeOf(p.into) === goal.targetType);
    if (goal.family !== "examine_in_light" && put === undefined) continue;
    let part = `found the ${obj} at ${startOf(scenario, obj)}`;
    const done = facts.processed.find((p) => p.obj === obj);
    if (tool !== undefined && done !== undefined) part += `, ${tool.verb}ed it with ${done.with}`;
    part += put !== undefined ? `, then put it in ${put.into}` : "";
    parts.push(part);
  }
  const lamp = facts.lampUses.find((u) => u.held !== null && typeOf(u.held) === goal.objectType);
  if (lamp !== undefined) parts.push(`then used ${lamp.lamp} while holding it`);
  return `Success in ${facts.steps} steps: the agent ${parts.join("; ")}.`;
}

/**
 * Every mistake of a failed episode that the replay shows, each with its corrective rule, as
 * `[mistake, instead]` pairs. The rules are tried in a fixed order and the first pair is the
 * reference analysis' mistake (`diagnose`): too many invalid actions; a desklamp used without
 * the goal object; a goal object put in the target unprocessed, or only in wrong receptacles, or
 * taken back out of it and not put back, or only one of two (distinct objects: one object put
 * twice is one); a wrong object taken; the goal object never found, or seen and never taken;
 * else the first goal object taken but never used under the lamp / processed / put in the
 * target. A rule that names an object or receptacle adds one pair per instance (each wrong
 * receptacle used, each goal object taken and never processed, …), and the closing rules also
 * hold of a goal object taken after the first; a pair whose mistake text repeats is left out.
 * Never empty for a lost episode. The skill judge counts a skill naming any of them as truthful.
 */
export function diagnoses(scenario: Scenario, facts: ReplayFacts): [string, string][] {
  const { goal } = scenario;
  const o = goal.objectType;
  const tool = TOOLS[goal.family];
  const found: [string, string][] = [];
  const add = (mistake: string, instead: string) => {
    if (!found.some(([m]) => m === mistake)) found.push([mistake, instead]);
  };
  if (facts.invalid * 2 > facts.steps) {
    add(
      `repeated invalid actions: ${facts.invalid} of ${facts.steps} actions were not admissible`,
      "choose only actions from the admissible list",
    );
  }
  if (goal.family === "examine_in_light") {
    const wrongUses = facts.lampUses.filter((u) => u.held === null || typeOf(u.held) !== o);
    for (const wrongUse of facts.tookGoal.length === 0 ? wrongUses : []) {
      add(
        wrongUse.held === null
          ? `used ${wrongUse.lamp} without holding a ${o}`
          : `used ${wrongUse.lamp} while holding the ${wrongUse.held} instead of a ${o}`,
        `take the ${o} first (${goalWhere(scenario)}), then use the desklamp`,
      );
    }
  } else {
    const goalPuts = facts.puts.filter((p) => typeOf(p.obj) === o);
    const inTarget = goalPuts.filter((p) => typeOf(p.into) === goal.targetType);
    const unprocessed = inTarget.filter((p) => !facts.processed.some((q) => q.obj === p.obj));
    for (const put of tool !== undefined ? unprocessed : []) {
      add(
        `forgot to ${tool.verb} the ${put.obj} before putting it in ${put.into}`,
        `${tool.verb} the ${o} with the ${tool.type} before putting it in the ${goal.targetType}`,
      );
    }
    const wrongPlaces = goalPuts.filter((p) => typeOf(p.into) !== goal.targetType);
    for (const wrongPlace of inTarget.length === 0 ? wrongPlaces : []) {
      add(
        `put the ${wrongPlace.obj} in ${wrongPlace.into}, the wrong receptacle, but the task ` +
          `needs a ${goal.targetType}`,
        `put the ${o} only in a ${goal.targetType}`,
      );
    }
    // An object put in the target and taken back out of it is not there for the goal check.
    for (const back of facts.tookBack) {
      add(
        `took the ${back.obj} from ${back.from} after putting it in the ${goal.targetType}`,
        `after putting the ${o} in the ${goal.targetType}, never take it from the ${goal.targetType}`,
      );
    }
    // Distinct objects, as the goal counts them (`goalReached`): the same object put in the
    // target twice (taken back out between) is still only one of the two.
    const placedObjects = new Set(inTarget.map((p) => p.obj));
    if (goal.family === "pick_two_and_place" && placedObjects.size === 1) {
      add(
        `put only one ${o} in the ${goal.targetType} and never brought the second one`,
        `after the first ${o}, fetch another ${o} (${goalWhere(scenario)}) and put it too`,
      );
    }
  }
  for (const other of facts.tookGoal.length === 0 ? facts.tookOther : []) {
    add(
      `took the wrong object: the ${other} instead of a ${o}`,
      `take only a ${o} (${goalWhere(scenario)})`,
    );
  }
  if (facts.seenGoalAt === null) {
    const hidden = [
      ...new Set(scenario.objects.filter((x) => x.type === o).map((x) => x.location)),
    ];
    const unopened = hidden.filter((r) => facts.visits.has(r) && !facts.opened.has(r));
    const why = unopened.length > 0
      ? `visited ${unopened.join(" and ")} but never opened it`
      : `never visited ${hidden.join(" or ")}`;
    add(
      `never found a ${o}, which was in ${goalWhere(scenario)}: it ${why}`,
      `search receptacles not yet visited and open closed ones until a ${o} is seen`,
    );
  } else if (facts.tookGoal.length === 0) {
    add(
      `saw a ${o} at ${facts.seenGoalAt} but never took it`,
      `take the ${o} as soon as it is seen`,
    );
  }
  // The closing rules: the reference names the first goal object taken when no rule above
  // holds; each also holds of any goal object taken of which its fact is true.
  const closing = (obj: string): [string, string] => {
    if (goal.family === "examine_in_light") {
      return [
        `took the ${obj} but never used the desklamp while holding it`,
        `after taking the ${o}, go to the desklamp and use it`,
      ];
    }
    if (tool !== undefined && facts.processed.length === 0) {
      return [
        `took the ${obj} but never ${tool.verb}ed it with the ${tool.type}`,
        `go to the ${tool.type} and ${tool.verb} the ${o} right after taking it`,
      ];
    }
    return [
      `took the ${obj} but ran out of steps before putting it in a ${goal.targetType}`,
      `go straight to the ${goal.targetType} and put the ${o}`,
    ];
  };
  if (found.length === 0) add(...closing(facts.tookGoal[0]));
  for (const obj of facts.tookGoal) {
    if (goal.family === "examine_in_light") {
      if (!facts.lampUses.some((u) => u.held === obj)) add(...closing(obj));
      continue;
    }
    if (tool !== undefined && !facts.processed.some((p) => p.obj === obj)) {
      add(
        `took the ${obj} but never ${tool.verb}ed it with the ${tool.type}`,
        `go to the ${tool.type} and ${tool.verb} the ${o} right after taking it`,
      );
    }
    if (!facts.puts.some((p) => p.obj === obj && typeOf(p.into) === goal.targetType)) {
      add(
        `took the ${obj} but ran out of steps before putting it in a ${goal.targetType}`,
        `go straight to the ${goal.targetType} and put the ${o}`,
      );
    }
  }
  return found;
}

/** The reference analysis' mistake of a failed episode: the first of {@link diagnoses}. */
function diagnose(scenario: Scenario, facts: ReplayFacts): [string, string] {
  return diagnoses(scenario, facts)[0];
}

function warningSigns(facts: ReplayFacts): string[] {
  const signs: string[] = [];
  if (facts.invalid > 0) signs.push(`${facts.invalid} invalid actions`);
  const repeated = [...facts.visits].filter(([, n]) => n >= 3).sort((a, b) => b[1] - a[1])
    .slice(0, 2).map(([r, n]) => `${r} ${n} times`);
  if (repeated.length > 0) signs.push(`visited ${repeated.join(", ")}`);
  return signs;
}

/** The reference analysis of a finished household trajectory. */
export function analyzeHousehold(
  trajectory: Trajectory,
  episode: HouseholdEpisode,
): { analysis: SkillAnalysis; facts: ReplayFacts } {
  const scenario = episode.scenario;
  const actions = trajectory.steps.map((s) => s.action);
  const facts = replay(episode, actions);
  if (facts.won) {
    return {
      facts,
      analysis: {
        episode_summary: successSummary(scenario, facts),
        episode_skill: `${capitalize(workflowRule(scenario))}.`,
      },
    };
  }
  const [mistake, instead] = diagnose(scenario, facts);
  const signs = warningSigns(facts);
  const warning = signs.length > 0 ? ` Warning signs: ${signs.join("; ")}.` : "";
  return {
    facts,
    analysis: {
      episode_summary: `Failure after ${facts.steps} steps: the agent ${mistake}.${warning}`,
      episode_skill: failureSkill(scenario, [mistake, instead]),
    },
  };
}

/**
 * The failure skill of one (mistake, correction) pair: `Avoid this mistake: … Instead, …; rule.`
 */
function failureSkill(scenario: Scenario, [mistake, instead]: [string, string]): string {
  return `Avoid this mistake: ${mistake}. Instead, ${instead}; ${workflowRule(scenario)}.`;
}

/**
 * The episode skills that state only true things of a finished trajectory (replayed into
 * `facts`): for a win the family's workflow rule with its object and target types; for a loss
 * one failure skill per pair of {@link diagnoses}. The first is the reference analysis'
 * `episode_skill`.
 */
export function trueEpisodeSkills(scenario: Scenario, facts: ReplayFacts): string[] {
  if (facts.won) return [`${capitalize(workflowRule(scenario))}.`];
  return diagnoses(scenario, facts).map((pair) => failureSkill(scenario, pair));
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
