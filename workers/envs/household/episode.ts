/**
 * The household simulator: ALFWorld's action grammar and observation sentences over a
 * {@link Scenario}. An action is valid exactly when it is in the admissible list of the current
 * state (after normalising case, spaces, a trailing period and `in`/`on`/`in/on`); anything else
 * gets "Nothing happens." with the state unchanged.
 *
 * With `statusLine` (env option `status_line`) every observation text gets a second line,
 * `You are carrying: a apple 1. To search: cabinet 2, drawer 1.` (or `You are not carrying
 * anything.`, `To search: nothing.`): the held object and, in the room's order, the receptacles
 * whose contents the agent has not yet seen (desklamps hold nothing and are never listed). It is
 * the memory a policy without history needs to search a room (workers/envs/README.md, "household").
 */
import type { Episode, Observation, StepResult, Task } from "../types.ts";
import type { Goal, PlacedObject, Receptacle, Scenario } from "./world.ts";
import { TOOLS } from "./world.ts";

/** Reward of a won episode (ALFWorld convention used by verl-agent: 10·won). */
export const WIN_REWARD = 10;

/** Mutable state of one episode. */
export interface HouseholdState {
  /** Receptacle the agent stands at, or null in the middle of the room. */
  location: string | null;
  /** Names of openable receptacles that are open. */
  open: Set<string>;
  /** Object name → receptacle name, or `"hand"` when held. */
  objectAt: Map<string, string>;
  /** The held object's name, or null. */
  held: string | null;
  cleaned: Set<string>;
  hot: Set<string>;
  cold: Set<string>;
  /** Names of desklamps that are switched on. */
  lampsOn: Set<string>;
  /** Receptacles whose contents an observation has shown (arrive, open or examine). */
  searched: Set<string>;
}

/** Normalises an action for matching: lowercase, single spaces, no trailing period. */
export function normalizeAction(text: string): string {
  let a = text.toLowerCase().replace(/\s+/g, " ").trim().replace(/[.!]+$/, "").trim();
  const put = /^put (.+?) (?:in\/on|in|on|into|onto) (.+)$/.exec(a);
  if (put !== null) a = `put ${put[1]} in/on ${put[2]}`;
  return a;
}

/** `a apple 1, a knife 2, and a mug 1` (ALFWorld's list style), or `nothing`. */
export function listObjects(names: readonly string[]): string {
  if (names.length === 0) return "nothing";
  const items = names.map((n) => `a ${n}`);
  if (items.length === 1) return items[0];
  return `${items.slice(0, -1).join(", ")}, and ${items[items.length - 1]}`;
}

/** A live household episode; see the module comment for the rules. */
export class HouseholdEpisode implements Episode {
  readonly task: Task;
  readonly scenario: Scenario;
  readonly maxTurns: number;
  readonly statusLine: boolean;
  #state: HouseholdState;
  #turns = 0;
  #done = false;
  #won = false;
  #receptacles: Map<string, Receptacle>;

  /**
   * @param maxTurns steps after which the episode ends (done, not won).
   * @param statusLine add the status line (see the module comment) under every observation.
   */
  constructor(task: Task, scenario: Scenario, maxTurns: number, statusLine = false) {
    this.task = task;
    this.scenario = scenario;
    this.maxTurns = maxTurns;
    this.statusLine = statusLine;
    this.#receptacles = new Map(scenario.layout.receptacles.map((r) => [r.name, r]));
    this.#state = initialState(scenario.objects);
  }

  /** A read-only view of the current state (for the expert and the analyzer). */
  get state(): Readonly<HouseholdState> {
    return this.#state;
  }

  /** Restarts the task; returns the first observation. */
  reset(): Observation {
    this.#state = initialState(this.scenario.objects);
    this.#turns = 0;
    this.#done = false;
    this.#won = false;
    const names = this.scenario.layout.receptacles.map((r) => r.name);
    return this.#observe(
      `You are in the middle of a room. Looking quickly around you, you see ${listObjects(names)}.`,
    );
  }

  /** The admissible actions of the current state, in a stable order. */
  admissibleActions(): string[] {
    const s = this.#state;
    const out: string[] = [];
    for (const r of this.scenario.layout.receptacles) {
      if (r.name !== s.location) out.push(`go to ${r.name}`);
    }
    const here = s.location === null ? undefined : this.#receptacles.get(s.location);
    if (here !== undefined) {
      if (here.openable) out.push(`${s.open.has(here.name) ? "close" : "open"} ${here.name}`);
      if (s.held === null && this.#contentsVisible(here)) {
        for (const o of this.#contents(here.name)) out.push(`take ${o} from ${here.name}`);
      }
      if (s.held !== null && here.type !== "desklamp" && this.#contentsVisible(here)) {
        out.push(`put ${s.held} in/on ${here.name}`);
      }
      if (s.held !== null) {
        for (const tool of Object.values(TOOLS)) {
          if (tool.type === here.type) out.push(`${tool.verb} ${s.held} with ${here.name}`);
        }
      }
      if (here.type === "desklamp") out.push(`use ${here.name}`);
      out.push(`examine ${here.name}`);
    }
    out.push("inventory", "look");
    return out;
  }

  /** Applies one action; invalid actions leave the state unchanged. */
  step(actionText: string): StepResult {
    if (this.#done) {
      return this.#result("The episode is over.", false);
    }
    const action = normalizeAction(actionText);
    this.#turns++;
    if (!this.admissibleActions().includes(action)) {
      return this.#result("Nothing happens.", false);
    }
    const text = this.#apply(action);
    if (goalReached(this.scenario.goal, this.#state)) {
      this.#won = true;
      this.#done = true;
      return this.#result(text, true, WIN_REWARD);
    }
    return this.#result(text, true);
  }

  #result(text: string, valid: boolean, reward = 0): StepResult {
    if (this.#turns >= this.maxTurns) this.#done = true;
    const observation = this.#observe(text);
    return {
      observation,
      reward,
      done: this.#done,
      won: this.#won,
      valid,
      info: { turn: this.#turns, held: this.#state.held },
    };
  }

  #observe(text: string): Observation {
    const shown = this.statusLine ? `${text}\n${this.#status()}` : text;
    return { text: shown, admissibleActions: this.#done ? [] : this.admissibleActions() };
  }

  /** The status line of option `statusLine` (module comment). */
  #status(): string {
    const s = this.#state;
    const carrying = s.held === null
      ? "You are not carrying anything."
      : `You are carrying: a ${s.held}.`;
    const left = this.scenario.layout.receptacles
      .filter((r) => r.type !== "desklamp" && !s.searched.has(r.name))
      .map((r) => r.name);
    return `${carrying} To search: ${left.length === 0 ? "nothing" : left.join(", ")}.`;
  }

  #apply(action: string): string {
    const s = this.#state;
    const [verb] = action.split(" ", 1);
    if (action.startsWith("go to ")) {
      const r = this.#receptacles.get(action.slice(6))!;
      s.location = r.name;
      return `You arrive at ${r.name}. ${this.#describe(r)}`;
    }
    if (verb === "open" || verb === "close") {
      const r = this.#receptacles.get(action.slice(verb.length + 1))!;
      if (verb === "close") {
        s.open.delete(r.name);
        return `You close the ${r.name}.`;
      }
      s.open.add(r.name);
      return `You open the ${r.name}. ${this.#describe(r)}`;
    }
    if (verb === "take") {
      const [obj, from] = action.slice(5).split(" from ");
      s.objectAt.set(obj, "hand");
      s.held = obj;
      return `You pick up the ${obj} from the ${from}.`;
    }
    if (verb === "put") {
      const [obj, into] = action.slice(4).split(" in/on ");
      s.objectAt.set(obj, into);
      s.held = null;
      return `You put the ${obj} in/on the ${into}.`;
    }
    if (verb === "clean" || verb === "heat" || verb === "cool") {
      const [obj, tool] = action.slice(verb.length + 1).split(" with ");
      if (verb === "clean") s.cleaned.add(obj);
      if (verb === "heat") s.cold.delete(obj);
      if (verb === "heat") s.hot.add(obj);
      if (verb === "cool") s.hot.delete(obj);
      if (verb === "cool") s.cold.add(obj);
      return `You ${verb} the ${obj} using the ${tool}.`;
    }
    if (verb === "use") {
      const lamp = action.slice(4);
      s.lampsOn.add(lamp);
      return `You turn on the ${lamp}.`;
    }
    if (verb === "examine") {
      return this.#describe(this.#receptacles.get(action.slice(8))!);
    }
    if (action === "inventory") {
      return s.held === null ? "You are not carrying anything." : `You are carrying: a ${s.held}.`;
    }
    return s.location === null
      ? "You are in the middle of a room."
      : `You are facing the ${s.location}.`;
  }

  #contents(receptacle: string): string[] {
    const out: string[] = [];
    for (const [obj, at] of this.#state.objectAt) if (at === receptacle) out.push(obj);
    return out;
  }

  #contentsVisible(r: Receptacle): boolean {
    return !r.openable || this.#state.open.has(r.name);
  }

  #describe(r: Receptacle): string {
    if (r.type === "desklamp") {
      return `The ${r.name} is ${this.#state.lampsOn.has(r.name) ? "on" : "off"}.`;
    }
    const seen = listObjects(this.#contents(r.name));
    if (!r.openable || this.#state.open.has(r.name)) this.#state.searched.add(r.name);
    if (!r.openable) return `On the ${r.name}, you see ${seen}.`;
    if (!this.#state.open.has(r.name)) return `The ${r.name} is closed.`;
    return `The ${r.name} is open. In it, you see ${seen}.`;
  }
}

function initialState(objects: readonly PlacedObject[]): HouseholdState {
  return {
    location: null,
    open: new Set(),
    objectAt: new Map(objects.map((o) => [o.name, o.location])),
    held: null,
    cleaned: new Set(),
    hot: new Set(),
    cold: new Set(),
    lampsOn: new Set(),
    searched: new Set(),
  };
}

/** The object type of a numbered object name (`apple 1` → `apple`). */
export function typeOf(name: string): string {
  return name.replace(/ \d+$/, "");
}

/**
 * Whether `state` satisfies `goal`: an object of the goal type (clean/hot/cool when the family
 * asks) inside a receptacle of the target type — two such for `pick_two_and_place` — or, for
 * `examine_in_light`, the goal object in hand while standing at a desklamp that is on.
 */
export function goalReached(goal: Goal, state: Readonly<HouseholdState>): boolean {
  if (goal.family === "examine_in_light") {
    return state.held !== null && typeOf(state.held) === goal.objectType &&
      state.location !== null && typeOf(state.location) === "desklamp" &&
      state.lampsOn.has(state.location);
  }
  const needs = goal.family === "clean_then_place"
    ? state.cleaned
    : goal.family === "heat_then_place"
    ? state.hot
    : goal.family === "cool_then_place"
    ? state.cold
    : null;
  let placed = 0;
  for (const [obj, at] of state.objectAt) {
    if (typeOf(obj) !== goal.objectType || at === "hand" || typeOf(at) !== goal.targetType) {
      continue;
    }
    if (needs === null || needs.has(obj)) placed++;
  }
  return placed >= (goal.family === "pick_two_and_place" ? 2 : 1);
}
