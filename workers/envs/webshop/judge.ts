/**
 * The WebShop skill grammar: the `episode_skill` sentences of analyzer.ts. On success the buying
 * rule (`To buy a {type} that is {attributes}, with {options}, at most {bound} dollars: search
 * for …, open an item whose title is …, click[{value}] …, then click[buy now].`); on failure
 * `Avoid this mistake: {mistake}. Instead, {buying rule}.` with one of the analyzer's mistakes.
 * Slots take legal values only: catalog product types, attributes and option values, dollar
 * amounts; the goal's type, attributes, option values and price bound are the same wherever they
 * recur (1–2 attributes and 1–2 options, as goals have). A skill it accepts is well-formed
 * (workers/envs/skill_judge.ts).
 */
import { alternation, compileSkillGrammar, type SkillTemplate } from "../skill_judge.ts";
import { CATEGORIES, OPTION_VALUES } from "./catalog.ts";

const TYPE = alternation(Object.values(CATEGORIES).flatMap((c) => Object.keys(c.types)));
const ATTR = alternation(Object.values(CATEGORIES).flatMap((c) => c.attributes));
const VALUE = alternation(Object.values(OPTION_VALUES).flat());
/** `optionPhrase` in goal.ts: the value, followed by its dimension for named dimensions. */
const PHRASE_TAIL = `(?: ${alternation(["color", "size", "flavor", "scent"])})?`;

/** The mistakes of analyzer.ts (`neverBought`, `purchaseMistakes`), first one stated. */
const MISTAKES = [
  "never searched and never bought anything",
  "searched but never opened an item, and never bought",
  "opened {n} items but never clicked buy now before the steps ran out",
  "bought a {ptype} instead of a {type}",
  "the item bought is not {attr}",
  "did not select {phrase}",
  "selected {value} instead of {value2}",
  "paid {price} dollars, over the budget of {bound} dollars",
];

/** The buying rule of analyzer.ts (`buyingRule`) for `attributes` and `options` counts. */
function buyingRule(attributes: number, options: number): string {
  const a = Array.from({ length: attributes }, (_, i) => `{a${i + 1}}`);
  const phrases = Array.from({ length: options }, (_, i) => `{p${i + 1}}`);
  const clicks = Array.from({ length: options }, (_, i) => `click[{v${i + 1}}]`);
  return `to buy a {type} that is ${a.join(" and ")}, with ${phrases.join(" and ")}, at most ` +
    `{bound} dollars: search for ${[...a, "{type}"].join(" ")}, open an item whose title is a ` +
    `{type} with features ${a.join(" and ")} and price at most {bound} dollars, ` +
    `${clicks.join(" and ")}, then click[buy now]`;
}

const SLOTS = {
  type: TYPE,
  ptype: TYPE,
  a1: ATTR,
  a2: ATTR,
  attr: ATTR,
  p1: `(?<v1>${VALUE})${PHRASE_TAIL}`,
  p2: `(?<v2>${VALUE})${PHRASE_TAIL}`,
  value: VALUE,
  value2: VALUE,
  phrase: `${VALUE}${PHRASE_TAIL}`,
  n: "\\d+",
  price: "\\d+",
  bound: "\\d+",
};

function templates(): SkillTemplate[] {
  const out: SkillTemplate[] = [];
  for (const attributes of [1, 2]) {
    for (const options of [1, 2]) {
      const rule = buyingRule(attributes, options);
      out.push({ text: `${rule}.`, slots: SLOTS });
      for (const mistake of MISTAKES) {
        out.push({ text: `Avoid this mistake: ${mistake}. Instead, ${rule}.`, slots: SLOTS });
      }
    }
  }
  return out;
}

/** The compiled grammar of WebShop skills. */
export const WEBSHOP_SKILL_GRAMMAR: readonly RegExp[] = compileSkillGrammar(templates());
