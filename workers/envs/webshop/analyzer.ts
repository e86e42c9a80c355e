/**
 * The WebShop reference analyzer: replays a trajectory in a fresh episode of its task and
 * reports what happened — on success the query, how the item was chosen and the options; on
 * failure the actual mistake (wrong type, missing attribute, wrong or unselected option, over
 * budget, never bought) with its warning signs.
 */
import type { SkillAnalysis, Trajectory } from "../types.ts";
import { CATALOG, type Product } from "./catalog.ts";
import { type Goal, optionPhrase, type RewardBreakdown } from "./goal.ts";
import type { WebshopEpisode } from "./episode.ts";

/** What a replay shows. */
export interface WebshopFacts {
  queries: string[];
  /** Products whose item page was opened, in order, with their result number. */
  opened: { productId: number; rank: number }[];
  /** The product bought and its reward breakdown, or null. */
  bought: { product: Product; breakdown: RewardBreakdown; selected: Record<string, string> } | null;
  pagesTurned: number;
  invalid: number;
  steps: number;
}

/** Replays `actions` from the search page. */
export function replayWebshop(episode: WebshopEpisode, actions: readonly string[]): WebshopFacts {
  const facts: WebshopFacts = {
    queries: [],
    opened: [],
    bought: null,
    pagesTurned: 0,
    invalid: 0,
    steps: 0,
  };
  episode.reset();
  for (const action of actions) {
    const before = episode.page;
    const result = episode.step(action);
    facts.steps++;
    if (!result.valid) facts.invalid++;
    const after = episode.page;
    if (result.valid && before.kind === "search" && after.kind === "results") {
      facts.queries.push(after.query);
    }
    if (result.valid && before.kind === "results" && after.kind === "item") {
      facts.opened.push({
        productId: after.productId,
        rank: after.ids.indexOf(after.productId) + 1,
      });
    }
    if (result.valid && before.kind === "results" && after.kind === "results") facts.pagesTurned++;
    if (result.valid && before.kind === "item" && result.info.breakdown !== undefined) {
      facts.bought = {
        product: CATALOG[before.productId],
        breakdown: result.info.breakdown as RewardBreakdown,
        selected: { ...before.selected },
      };
    }
    if (result.done) break;
  }
  return facts;
}

function wants(goal: Goal): string {
  const opts = Object.entries(goal.options).map(([d, v]) => optionPhrase(d, v));
  return `a ${goal.type} that is ${goal.attributes.join(" and ")}, with ${
    opts.join(" and ")
  }, at most ${goal.priceBound} dollars`;
}

/** The general buying rule with this goal's names filled in. */
export function buyingRule(goal: Goal): string {
  const opts = Object.values(goal.options).map((v) => `click[${v}]`).join(" and ");
  return `to buy ${wants(goal)}: search for ${[...goal.attributes, goal.type].join(" ")}, ` +
    `open an item whose title is a ${goal.type} with features ${
      goal.attributes.join(" and ")
    } and price at most ${goal.priceBound} dollars, ${opts}, then click[buy now]`;
}

/** The mistakes of a purchase, most important first. */
function purchaseMistakes(goal: Goal, bought: NonNullable<WebshopFacts["bought"]>): string[] {
  const { product, breakdown } = bought;
  const out: string[] = [];
  if (product.type !== goal.type) out.push(`bought a ${product.type} instead of a ${goal.type}`);
  for (const a of breakdown.attributesMissing) out.push(`the item bought is not ${a}`);
  for (const m of breakdown.optionsMissing) {
    out.push(
      m.selected === null
        ? `did not select ${optionPhrase(m.dimension, m.wanted)}`
        : `selected ${m.selected} instead of ${m.wanted}`,
    );
  }
  if (!breakdown.priceOk) {
    out.push(`paid ${product.price} dollars, over the budget of ${goal.priceBound} dollars`);
  }
  return out;
}

function neverBought(facts: WebshopFacts): string {
  if (facts.queries.length === 0) return "never searched and never bought anything";
  if (facts.opened.length === 0) return "searched but never opened an item, and never bought";
  return `opened ${facts.opened.length} items but never clicked buy now before the steps ran out`;
}

/** The reference analysis of a finished WebShop trajectory. */
export function analyzeWebshop(trajectory: Trajectory, episode: WebshopEpisode): SkillAnalysis {
  const goal = episode.goal;
  const facts = replayWebshop(episode, trajectory.steps.map((s) => s.action));
  const bought = facts.bought;
  if (bought !== null && bought.breakdown.reward === 1) {
    const opts = Object.values(bought.selected).join(" and ");
    const rank = facts.opened.at(-1)?.rank ?? 0;
    return {
      episode_summary: `Success in ${facts.steps} steps: searched "${facts.queries.at(-1)}", ` +
        `opened item ${rank}, ${bought.product.title} at ${bought.product.price} dollars, ` +
        `a ${goal.type} with ${goal.attributes.join(" and ")}, selected ${opts}, and bought it.`,
      episode_skill: `${buyingRule(goal)}.`.replace(/^to/, "To"),
    };
  }
  const mistakes = bought === null ? [neverBought(facts)] : purchaseMistakes(goal, bought);
  const signs: string[] = [];
  if (facts.invalid > 0) signs.push(`${facts.invalid} invalid actions`);
  if (facts.queries.length > 1) signs.push(`${facts.queries.length} searches`);
  if (facts.pagesTurned > 2) signs.push(`${facts.pagesTurned} result pages turned`);
  const warning = signs.length > 0 ? ` Warning signs: ${signs.join(", ")}.` : "";
  const what = bought === null
    ? ""
    : ` bought ${bought.product.title} (score ${Math.round(bought.breakdown.reward * 100)});`;
  return {
    episode_summary: `Failure after ${facts.steps} steps:${what} ${mistakes.join("; ")}.${warning}`,
    episode_skill: `Avoid this mistake: ${mistakes[0]}. Instead, ${buyingRule(goal)}.`,
  };
}
