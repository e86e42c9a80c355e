/**
 * The WebShop expert: it knows the goal and the catalog. It searches with the goal's type and
 * attributes, pages through the results to the first item that fully satisfies the goal
 * (type, attributes, option values, price), selects the goal options and buys. When no result
 * satisfies the goal it goes back and searches with the exact title of the goal's source
 * product plus its options, which ranks that product first.
 */
import type { Expert, Observation, Task } from "../types.ts";
import { CATALOG } from "./catalog.ts";
import { type Goal, satisfies } from "./goal.ts";
import { PAGE_SIZE, WEBSHOP_MAX_TURNS, WebshopEpisode } from "./episode.ts";

/** The expert's first query: goal attributes then type (e.g. `long lasting shampoo`). */
export function expertQuery(goal: Goal): string {
  return [...goal.attributes, goal.type].join(" ");
}

/** An expert driving a private mirror of the episode (deterministic, so it stays in sync). */
export class WebshopExpert implements Expert {
  readonly goal: Goal;
  #mirror: WebshopEpisode;
  #searches = 0;

  /** @param task the task; @param goal its goal (ground truth). */
  constructor(task: Task, goal: Goal) {
    this.goal = goal;
    this.#mirror = new WebshopEpisode(task, goal, WEBSHOP_MAX_TURNS);
    this.#mirror.reset();
  }

  /** The next action; the observation is not needed as the mirror holds the same state. */
  act(_observation: Observation): string {
    const action = this.#decide();
    this.#mirror.step(action);
    return action;
  }

  #decide(): string {
    const page = this.#mirror.page;
    const goal = this.goal;
    if (page.kind === "search") {
      this.#searches++;
      if (this.#searches === 1) return `search[${expertQuery(goal)}]`;
      const source = CATALOG[goal.sourceProductId];
      return `search[${[source.title, ...Object.values(goal.options)].join(" ")}]`;
    }
    if (page.kind === "results") {
      const good = page.ids.findIndex((id) => satisfies(goal, CATALOG[id]));
      if (good < 0) return "click[back to search]";
      const goodPage = Math.floor(good / PAGE_SIZE);
      if (goodPage > page.page) return "click[next >]";
      if (goodPage < page.page) return "click[< prev]";
      return `click[item ${good + 1}]`;
    }
    for (const [dim, value] of Object.entries(goal.options)) {
      if (page.selected[dim] !== value) return `click[${value}]`;
    }
    return "click[buy now]";
  }
}
