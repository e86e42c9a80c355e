/**
 * The household expert: it knows where every object is (the scenario) and plans the shortest
 * go-to/open/take/clean|heat|cool/use/put sequence, like ALFWorld's handcoded expert.
 */
import type { Expert, Observation } from "../types.ts";
import type { Scenario } from "./world.ts";
import { TOOLS } from "./world.ts";

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

/** An expert that replays {@link expertPlan}; after the plan it answers `look`. */
export class HouseholdExpert implements Expert {
  readonly plan: readonly string[];
  #next = 0;

  /** @param scenario the ground truth of the task being solved. */
  constructor(scenario: Scenario) {
    this.plan = expertPlan(scenario);
  }

  /** The next planned action (the observation is not needed: the expert knows the state). */
  act(_observation: Observation): string {
    return this.plan[this.#next++] ?? "look";
  }
}
