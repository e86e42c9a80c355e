/**
 * The household experts. `oracle` (the default) knows where every object is (the scenario) and
 * plans the shortest go-to/open/take/clean|heat|cool/use/put sequence, like ALFWorld's handcoded
 * expert. `search` (env option `expert: "search"`) acts only on what it has seen: it searches the
 * receptacles in the room's order (opening closed ones) until it sees an object of the goal type,
 * then finishes the task as the oracle does — the demonstrations a policy can imitate from its
 * prompt (with option `status_line`), since the oracle's first step needs knowledge no prompt has.
 * The usual-first search (`searchPlan`'s `usualFirst`) searches the goal object type's usual
 * places first: the expert of the skilled demonstrations, whose skill states those places.
 */
import type { Expert, Observation, Task } from "../types.ts";
import type { Scenario } from "./world.ts";
import { TOOLS, usualPlaceTypes } from "./world.ts";
import { goalReached, HouseholdEpisode, typeOf } from "./episode.ts";

/** Receptacle of `type` the expert uses: the first by name (surfaces before openables). */
function firstOfType(scenario: Scenario, type: string): string {
  const matches = scenario.layout.receptacles.filter((r) => r.type === type);
  const surface = matches.find((r) => !r.openable);
  return (surface ?? matches[0]).name;
}

/**
 * The full action plan of the expert from the initial state of `scenario` (every action is
 * admissible when played in order from `reset()`).
 */
export function expertPlan(scenario: Scenario): string[] {
  const { goal, layout } = scenario;
  const openable = new Set(layout.receptacles.filter((r) => r.openable).map((r) => r.name));
  const where = new Map(scenario.objects.map((o) => [o.name, o.location]));
  const opened = new Set<string>();
  const plan: string[] = [];
  let at: string | null = null;
  const goTo = (name: string, needInside: boolean) => {
    if (at !== name) plan.push(`go to ${name}`);
    at = name;
    if (needInside && openable.has(name) && !opened.has(name)) {
      plan.push(`open ${name}`);
      opened.add(name);
    }
  };
  const fetch = (obj: string) => {
    const from = where.get(obj)!;
    goTo(from, true);
    plan.push(`take ${obj} from ${from}`);
  };
  const wanted = scenario.objects.filter((o) => o.type === goal.objectType).map((o) => o.name);
  const count = goal.family === "pick_two_and_place" ? 2 : 1;
  for (const obj of wanted.slice(0, count)) {
    fetch(obj);
    if (goal.family === "examine_in_light") {
      const lamp = firstOfType(scenario, "desklamp");
      goTo(lamp, false);
      plan.push(`use ${lamp}`);
      continue;
    }
    const tool = TOOLS[goal.family];
    if (tool !== undefined) {
      const device = firstOfType(scenario, tool.type);
      goTo(device, false);
      plan.push(`${tool.verb} ${obj} with ${device}`);
    }
    const target = firstOfType(scenario, goal.targetType);
    goTo(target, true);
    plan.push(`put ${obj} in/on ${target}`);
    where.set(obj, target);
  }
  return plan;
}

/** Safety bound of {@link searchPlan}'s simulation (no task needs more than ~30 actions). */
const SEARCH_PLAN_MAX_ACTIONS = 100;

/** Options of {@link searchPlan}. */
export interface SearchPlanOptions {
  /**
   * Search the receptacles of the goal object type's usual places (world.ts `usualPlaceTypes`)
   * other than the target type first, then the rest, each group in the room's order. Default
   * false: the room's order.
   */
  usualFirst?: boolean;
}

/**
 * The `search` expert's plan (module comment), found by playing its rule on a fresh episode of
 * `task`: holding nothing, it takes the first object of the goal type that is in sight and not
 * yet in place, else opens the closed receptacle it stands at if not yet searched, else goes to
 * the first receptacle not yet searched in the room's order (desklamps skipped), or with
 * `usualFirst` in the room's order after the usual places' receptacles. Holding the
 * object it uses the tool or desklamp of the family, then goes to the first receptacle of the
 * target type (surfaces first), opens it if closed and puts the object. `pick_two_and_place`
 * with both objects in one receptacle, or the second one seen before the first was placed, goes
 * back to where the second one was seen (it remembers what it saw, as a person would). Every
 * action is admissible when played in order from `reset()`.
 */
export function searchPlan(
  task: Task,
  scenario: Scenario,
  options: SearchPlanOptions = {},
): string[] {
  const episode = new HouseholdEpisode(task, scenario, SEARCH_PLAN_MAX_ACTIONS);
  episode.reset();
  const { goal, layout } = scenario;
  const tool = TOOLS[goal.family];
  const wanted = (obj: string, at: string) =>
    typeOf(obj) === goal.objectType && at !== "hand" && typeOf(at) !== goal.targetType;
  const firstOf = (type: string) => {
    const matches = layout.receptacles.filter((r) => r.type === type);
    return (matches.find((r) => !r.openable) ?? matches[0]).name;
  };
  const openable = new Set(layout.receptacles.filter((r) => r.openable).map((r) => r.name));
  // No goal object starts in a receptacle of the target type (world.ts generateScenario).
  const usual = new Set(
    options.usualFirst ? usualPlaceTypes(scenario).filter((t) => t !== goal.targetType) : [],
  );
  const order = [
    ...layout.receptacles.filter((r) => usual.has(r.type)),
    ...layout.receptacles.filter((r) => !usual.has(r.type)),
  ];
  const seenAt = new Map<string, string>(); // goal object → where it was seen
  const plan: string[] = [];
  const next = (): string | null => {
    const s = episode.state;
    const at = s.location;
    if (s.held !== null) {
      const processed = tool === undefined ||
        (tool.verb === "clean" ? s.cleaned : tool.verb === "heat" ? s.hot : s.cold).has(s.held);
      const place = goal.family === "examine_in_light"
        ? firstOf("desklamp")
        : processed
        ? firstOf(goal.targetType)
        : firstOf(tool!.type);
      if (at !== place) return `go to ${place}`;
      if (goal.family === "examine_in_light") return `use ${place}`;
      if (!processed) return `${tool!.verb} ${s.held} with ${place}`;
      if (openable.has(place) && !s.open.has(place)) return `open ${place}`;
      return `put ${s.held} in/on ${place}`;
    }
    const inSight = at === null ? [] : [...s.objectAt]
      .filter(([obj, where]) => where === at && wanted(obj, where) && s.searched.has(at))
      .map(([obj]) => obj);
    if (inSight.length > 0) return `take ${inSight[0]} from ${at}`;
    if (at !== null && openable.has(at) && !s.open.has(at) && !s.searched.has(at)) {
      return `open ${at}`;
    }
    const unsearched = order.find((r) => r.type !== "desklamp" && !s.searched.has(r.name));
    const remembered = [...seenAt].find(([obj, where]) => s.objectAt.get(obj) === where);
    const target = remembered?.[1] ?? unsearched?.name;
    return target === undefined ? null : `go to ${target}`;
  };
  while (!goalReached(goal, episode.state) && plan.length < SEARCH_PLAN_MAX_ACTIONS) {
    const action = next();
    if (action === null) break;
    plan.push(action);
    episode.step(action);
    const s = episode.state;
    for (const [obj, where] of s.objectAt) {
      if (wanted(obj, where) && s.searched.has(where)) seenAt.set(obj, where);
    }
  }
  return plan;
}

/** An expert that replays its plan ({@link expertPlan} or {@link searchPlan}); then `look`. */
export class HouseholdExpert implements Expert {
  readonly plan: readonly string[];
  #next = 0;

  /**
   * @param scenario the ground truth of the task being solved.
   * @param search the `search` expert's task (module comment); left out, the oracle's plan.
   * @param options the search's options ({@link searchPlan}); unused by the oracle.
   */
  constructor(scenario: Scenario, search?: Task, options?: SearchPlanOptions) {
    this.plan = search === undefined ? expertPlan(scenario) : searchPlan(search, scenario, options);
  }

  /** The next planned action (the observation is not needed: the expert knows the state). */
  act(_observation: Observation): string {
    return this.plan[this.#next++] ?? "look";
  }
}
