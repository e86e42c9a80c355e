import assert from "node:assert/strict";
import {
  CATALOG,
  type Goal,
  type Product,
  searchCatalog,
  webshopEnvironment as env,
  webshopGoal,
} from "../../../workers/envs/webshop/mod.ts";
import { MAX_RESULTS, PAGE_SIZE } from "../../../workers/envs/webshop/episode.ts";
import type { SkillAnalysis, Task } from "../../../workers/envs/types.ts";
import { wordsOf } from "../../../workers/envs/prompt.ts";
import { runActions, runPolicy } from "./household_helpers.ts";

/** Actions that search for `product` by its title and open its item page. */
function openProduct(product: Product): string[] {
  const ids = searchCatalog(product.title, MAX_RESULTS);
  const rank = ids.indexOf(product.id);
  assert.ok(rank >= 0, `product ${product.id} is not found by its title`);
  const pages = Array(Math.floor(rank / PAGE_SIZE)).fill("click[next >]");
  return [`search[${product.title}]`, ...pages, `click[item ${rank + 1}]`];
}

function analyze(task: Task, actions: string[]): SkillAnalysis {
  const analysis = env.referenceAnalysis(runActions(env, task, actions));
  const vocabulary = new Set(env.vocabulary());
  const words = wordsOf(`${analysis.episode_summary} ${analysis.episode_skill}`);
  assert.deepEqual(words.filter((w) => !vocabulary.has(w)), []);
  return analysis;
}

/** The first task (and its goal) for which `find` returns a product. */
function findCase(find: (goal: Goal) => Product | undefined): [Task, Goal, Product] {
  for (const task of env.sampleTasks("train", 200, 31)) {
    const goal = webshopGoal(task);
    const product = find(goal);
    if (product !== undefined) return [task, goal, product];
  }
  throw new Error("Cannot build the test case as no task of the first 200 fits");
}

Deno.test("a success names the query, the item bought and the options chosen", () => {
  const task = env.sampleTasks("train", 1, 2)[0];
  const goal = webshopGoal(task);
  const expert = env.createExpert(task);
  const trajectory = runPolicy(env, task, (obs) => expert.act(obs));
  assert.ok(trajectory.won);
  const analysis = env.referenceAnalysis(trajectory);
  const query = trajectory.steps[0].action.slice(7, -1);
  assert.ok(analysis.episode_summary.includes(`searched "${query}"`));
  for (const value of Object.values(goal.options)) {
    assert.ok(analysis.episode_summary.includes(value), value);
    assert.ok(analysis.episode_skill.includes(`click[${value}]`), value);
  }
  assert.ok(analysis.episode_skill.includes(goal.type));
  assert.ok(analysis.episode_skill.includes(`at most ${goal.priceBound} dollars`));
});

Deno.test("buying with a different option value names the option chosen and the one wanted", () => {
  const [task, goal, product] = findCase((g) => CATALOG[g.sourceProductId]);
  const [dim, wanted] = Object.entries(goal.options)[0];
  const other = product.options[dim].find((v) => v !== wanted)!;
  const analysis = analyze(task, [...openProduct(product), `click[${other}]`, "click[buy now]"]);
  assert.ok(analysis.episode_skill.includes(`selected ${other} instead of ${wanted}`));
  assert.ok(analysis.episode_summary.includes(product.title));
});

Deno.test("buying over budget names the price and the bound", () => {
  const [task, goal, product] = findCase((g) =>
    CATALOG.find((p) =>
      p.type === g.type && p.price > g.priceBound &&
      g.attributes.every((a) => p.attributes.includes(a))
    )
  );
  const clicks = Object.entries(goal.options)
    .filter(([d, v]) => product.options[d].includes(v)).map(([, v]) => `click[${v}]`);
  const analysis = analyze(task, [...openProduct(product), ...clicks, "click[buy now]"]);
  assert.ok(
    analysis.episode_summary.includes(
      `paid ${product.price} dollars, over the budget of ${goal.priceBound} dollars`,
    ),
  );
});

Deno.test("buying the wrong product type is named first", () => {
  const [task, goal, product] = findCase((g) => CATALOG.find((p) => p.type !== g.type));
  const analysis = analyze(task, [...openProduct(product), "click[buy now]"]);
  assert.ok(analysis.episode_skill.includes(`bought a ${product.type} instead of a ${goal.type}`));
});

Deno.test("a missing attribute is named", () => {
  const [task, goal, product] = findCase((g) =>
    CATALOG.find((p) => p.type === g.type && !p.attributes.includes(g.attributes[0]))
  );
  const analysis = analyze(task, [...openProduct(product), "click[buy now]"]);
  assert.ok(analysis.episode_summary.includes(`the item bought is not ${goal.attributes[0]}`));
});

Deno.test("never buying is named, with the warning signs", () => {
  const task = env.sampleTasks("train", 1, 9)[0];
  const actions = ["search[red]", "click[next >]", "click[next >]", "click[next >]"];
  while (actions.length < env.defaultMaxTurns) actions.push("click[flying carpet]");
  const analysis = analyze(task, actions);
  assert.ok(analysis.episode_summary.includes("searched but never opened an item"));
  assert.ok(analysis.episode_summary.includes("11 invalid actions"));
  assert.ok(analysis.episode_summary.includes("3 result pages turned"));
});
