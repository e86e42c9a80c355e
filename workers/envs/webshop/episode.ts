/**
 * The WebShop simulator: a search page, result pages (5 items each, at most 20 results), item
 * pages with options, and buying. Actions (case-insensitive):
 *
 * - `search[query]` on the search page;
 * - `click[item N]` (N as numbered on the results page), `click[next >]`, `click[< prev]`
 *   (previous results page, or from an item page back to its results), `click[back to search]`;
 * - on an item page `click[VALUE]` selects an option value, e.g. `click[blue]`,
 *   `click[16 ounce]` (values are unique across dimensions), and `click[buy now]` buys.
 *
 * An action is valid exactly when it is admissible on the current page (`search[…]` with any
 * non-empty query counts); otherwise the state is unchanged. The episode ends at the purchase
 * (reward = WebShop score in [0, 1]) or after {@link WEBSHOP_MAX_TURNS} steps (reward 0).
 */
import type { Episode, Observation, StepResult, Task } from "../types.ts";
import { CATALOG } from "./catalog.ts";
import { computeReward, type Goal, type RewardBreakdown } from "./goal.ts";
import { searchCatalog } from "./search.ts";

/** Default and maximum steps per episode (WebShop agents are usually given 15). */
export const WEBSHOP_MAX_TURNS = 15;
/** Results per page. */
export const PAGE_SIZE = 5;
/** Results kept per search. */
export const MAX_RESULTS = 20;
/** The admissible-action entry shown on the search page. */
export const SEARCH_ACTION = "search[<your query>]";

/** Where the shopper is. */
export type Page =
  | { kind: "search" }
  | { kind: "results"; query: string; ids: number[]; page: number }
  | {
    kind: "item";
    query: string;
    ids: number[];
    page: number;
    productId: number;
    selected: Record<string, string>;
  };

/** Parses `search[x]` / `click[x]` (brackets required); null when neither. */
export function parseWebAction(text: string): { verb: "search" | "click"; arg: string } | null {
  const m = /^(search|click)\s*\[(.*)\]$/s.exec(text.trim().toLowerCase().replace(/\.$/, ""));
  if (m === null) return null;
  const arg = m[2].replace(/\s+/g, " ").trim();
  return arg === "" ? null : { verb: m[1] as "search" | "click", arg };
}

/** A live WebShop episode; see the module comment. */
export class WebshopEpisode implements Episode {
  readonly task: Task;
  readonly goal: Goal;
  readonly maxTurns: number;
  #page: Page = { kind: "search" };
  #turns = 0;
  #done = false;
  #bought: RewardBreakdown | null = null;

  /** @param maxTurns steps after which the episode ends unbought (reward 0). */
  constructor(task: Task, goal: Goal, maxTurns: number) {
    this.task = task;
    this.goal = goal;
    this.maxTurns = maxTurns;
  }

  /** The current page (read-only view, for the expert and the analyzer). */
  get page(): Readonly<Page> {
    return this.#page;
  }

  /** Restarts on the search page. */
  reset(): Observation {
    this.#page = { kind: "search" };
    this.#turns = 0;
    this.#done = false;
    this.#bought = null;
    return this.#observe();
  }

  /** Admissible clicks of the current page (the search page lists {@link SEARCH_ACTION}). */
  admissibleActions(): string[] {
    const p = this.#page;
    if (p.kind === "search") return [SEARCH_ACTION];
    const out = ["click[back to search]"];
    if (p.kind === "results") {
      if (p.page > 0) out.push("click[< prev]");
      if ((p.page + 1) * PAGE_SIZE < p.ids.length) out.push("click[next >]");
      for (let i = p.page * PAGE_SIZE; i < Math.min(p.ids.length, (p.page + 1) * PAGE_SIZE); i++) {
        out.push(`click[item ${i + 1}]`);
      }
      return out;
    }
    out.push("click[< prev]");
    for (const values of Object.values(CATALOG[p.productId].options)) {
      for (const v of values) out.push(`click[${v}]`);
    }
    out.push("click[buy now]");
    return out;
  }

  /** Applies one action; invalid actions leave the page unchanged. */
  step(actionText: string): StepResult {
    if (this.#done) return this.#result(false, "The episode is over.");
    this.#turns++;
    const action = parseWebAction(actionText);
    const p = this.#page;
    if (action === null) return this.#result(false);
    if (action.verb === "search") {
      if (p.kind !== "search") return this.#result(false);
      this.#page = {
        kind: "results",
        query: action.arg,
        ids: searchCatalog(action.arg, MAX_RESULTS),
        page: 0,
      };
      return this.#result(true);
    }
    const click = `click[${action.arg}]`;
    if (!this.admissibleActions().includes(click)) return this.#result(false);
    const arg = action.arg;
    if (arg === "back to search") this.#page = { kind: "search" };
    else if (p.kind === "results") {
      if (arg === "next >") this.#page = { ...p, page: p.page + 1 };
      else if (arg === "< prev") this.#page = { ...p, page: p.page - 1 };
      else {
        const rank = Number(arg.slice(5)) - 1;
        this.#page = { ...p, kind: "item", productId: p.ids[rank], selected: {} };
      }
    } else if (p.kind === "item") {
      if (arg === "< prev") {
        this.#page = { kind: "results", query: p.query, ids: p.ids, page: p.page };
      } else if (arg === "buy now") {
        this.#bought = computeReward(this.goal, CATALOG[p.productId], p.selected);
        this.#done = true;
        return this.#result(true, undefined, this.#bought.reward);
      } else {
        const options = CATALOG[p.productId].options;
        const dim = Object.keys(options).find((d) => options[d].includes(arg))!;
        this.#page = { ...p, selected: { ...p.selected, [dim]: arg } };
      }
    }
    return this.#result(true);
  }

  #result(valid: boolean, text?: string, reward = 0): StepResult {
    if (this.#turns >= this.maxTurns) this.#done = true;
    const observation = this.#observe(valid ? text : "Invalid action.");
    const info: Record<string, unknown> = { turn: this.#turns, page: this.#page.kind };
    if (this.#bought !== null) {
      info.score = this.#bought.reward;
      info.breakdown = this.#bought;
    } else if (this.#done) {
      info.score = 0;
    }
    const won = this.#bought !== null && this.#bought.reward === 1;
    return { observation, reward, done: this.#done, won, valid, info };
  }

  #observe(prefix?: string): Observation {
    const text = [prefix, this.#describe()].filter((s) => s !== undefined).join(" ");
    return { text, admissibleActions: this.#done ? [] : this.admissibleActions() };
  }

  #describe(): string {
    if (this.#bought !== null) {
      const p = this.#page.kind === "item" ? CATALOG[this.#page.productId] : null;
      return `You bought ${p?.title ?? "an item"}. Score: ${
        Math.round(this.#bought.reward * 100)
      }.`;
    }
    const p = this.#page;
    if (p.kind === "search") return "Search page. Type search[your query].";
    if (p.kind === "results") {
      if (p.ids.length === 0) return `No results for "${p.query}".`;
      const pages = Math.ceil(p.ids.length / PAGE_SIZE);
      const items: string[] = [];
      for (let i = p.page * PAGE_SIZE; i < Math.min(p.ids.length, (p.page + 1) * PAGE_SIZE); i++) {
        const product = CATALOG[p.ids[i]];
        items.push(`[item ${i + 1}] ${product.title} $${product.price}`);
      }
      return `Results for "${p.query}", page ${p.page + 1} of ${pages}: ${items.join("; ")}.`;
    }
    const product = CATALOG[p.productId];
    const options = Object.entries(product.options)
      .map(([d, vs]) => `${d}: ${vs.map((v) => `[${v}]`).join(" ")}.`).join(" ");
    const selected = Object.values(p.selected);
    return `Item: ${product.title}. Price: $${product.price}. Features: ${
      product.attributes.join(", ")
    }. ${options} Selected: ${selected.length === 0 ? "none" : selected.join(", ")}.`;
  }
}
