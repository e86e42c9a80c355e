/**
 * WebShop goals (instruction, attributes, options, price bound, product type) and the reward of
 * buying a product with some options selected (Yao et al. 2022, §3.1 and `get_reward` of its
 * code):
 *
 *   r = r_type · (|goal attrs ∩ product attrs| + |goal opts selected| + [price ≤ bound])
 *                / (|goal attrs| + |goal opts| + 1)
 *
 * Our simplifications: attributes match exactly (WebShop also fuzzy-matches them against the
 * title); options match when the selected value of the goal's dimension equals the goal value;
 * r_type = 1 when the product type equals the goal type, 0.5 when only the category matches,
 * 0.1 otherwise (WebShop derives r_type from query, category and title-noun overlap with the
 * same spirit). Success means r = 1.
 */
import { CATALOG, CATEGORY_OF, type Product, UNSEEN_TYPES } from "./catalog.ts";
import { Rng } from "../_rng.ts";
import type { Split } from "../types.ts";

/** What the shopper wants. */
export interface Goal {
  /** Product type, e.g. `shampoo`. */
  type: string;
  category: string;
  attributes: string[];
  /** Option dimension → wanted value. */
  options: Record<string, string>;
  /** Inclusive price bound in dollars. */
  priceBound: number;
  /** The product the goal was drawn from (always satisfies it). */
  sourceProductId: number;
  instruction: string;
}

/** The reward and its parts (WebShop's breakdown). */
export interface RewardBreakdown {
  reward: number;
  typeReward: number;
  attributesMatched: string[];
  attributesMissing: string[];
  optionsMatched: string[];
  /** Goal options not selected: wanted value and what was selected instead (or null). */
  optionsMissing: { dimension: string; wanted: string; selected: string | null }[];
  priceOk: boolean;
}

/** Options that read as a phrase with their dimension name (`blue color`). */
const NAMED_DIMENSIONS = new Set(["color", "size", "flavor", "scent"]);

/** How an option value is said in an instruction: `blue color`, `16 ounce`, `size 9`. */
export function optionPhrase(dimension: string, value: string): string {
  return NAMED_DIMENSIONS.has(dimension) ? `${value} ${dimension}` : value;
}

const PREFIXES = ["i need", "i am looking for", "find me"];

/** Every fixed word pattern of instructions (for the vocabulary). */
export const INSTRUCTION_WORDS = [...PREFIXES, "a with and under dollars", ...NAMED_DIMENSIONS];

/** Draws a goal from `seed`: a product of a split's types, some of its attributes and options. */
export function generateGoal(seed: number, split: Split): Goal {
  const rng = new Rng(seed);
  const candidates = CATALOG.filter((p) => UNSEEN_TYPES.has(p.type) === (split === "test_unseen"));
  const source = rng.pick(candidates);
  const attributes = rng.sample(source.attributes, rng.range(1, 2))
    .sort((a, b) => source.attributes.indexOf(a) - source.attributes.indexOf(b));
  const options: Record<string, string> = {};
  for (const [dim, values] of Object.entries(source.options)) options[dim] = rng.pick(values);
  const priceBound = (Math.floor(source.price / 10) + 1 + rng.int(2)) * 10;
  const opts = Object.entries(options).map(([d, v]) => optionPhrase(d, v)).join(" and ");
  const instruction = `${rng.pick(PREFIXES)} a ${attributes.join(" and ")} ${source.type} ` +
    `with ${opts} under ${priceBound} dollars`;
  return {
    type: source.type,
    category: source.category,
    attributes,
    options,
    priceBound,
    sourceProductId: source.id,
    instruction,
  };
}

/** WebShop's reward of buying `product` with `selected` options for `goal` (see module doc). */
export function computeReward(
  goal: Goal,
  product: Product,
  selected: Readonly<Record<string, string>>,
): RewardBreakdown {
  const typeReward = product.type === goal.type
    ? 1
    : CATEGORY_OF.get(product.type) === goal.category
    ? 0.5
    : 0.1;
  const attributesMatched = goal.attributes.filter((a) => product.attributes.includes(a));
  const attributesMissing = goal.attributes.filter((a) => !product.attributes.includes(a));
  const optionsMatched: string[] = [];
  const optionsMissing: RewardBreakdown["optionsMissing"] = [];
  for (const [dimension, wanted] of Object.entries(goal.options)) {
    if (selected[dimension] === wanted) optionsMatched.push(wanted);
    else optionsMissing.push({ dimension, wanted, selected: selected[dimension] ?? null });
  }
  const priceOk = product.price <= goal.priceBound;
  const total = goal.attributes.length + Object.keys(goal.options).length + 1;
  const matched = attributesMatched.length + optionsMatched.length + (priceOk ? 1 : 0);
  const reward = typeReward * matched / total;
  return {
    reward,
    typeReward,
    attributesMatched,
    attributesMissing,
    optionsMatched,
    optionsMissing,
    priceOk,
  };
}

/** True when `product` can satisfy `goal` fully (type, attributes, option values, price). */
export function satisfies(goal: Goal, product: Product): boolean {
  return product.type === goal.type && product.price <= goal.priceBound &&
    goal.attributes.every((a) => product.attributes.includes(a)) &&
    Object.entries(goal.options).every(([d, v]) => product.options[d]?.includes(v) ?? false);
}
