import assert from "node:assert/strict";
import {
  CATALOG,
  computeReward,
  type Goal,
  type Product,
  searchCatalog,
  UNSEEN_TYPES,
  WEBSHOP_MAX_TURNS,
  webshopEnvironment as env,
  webshopGoal,
} from "../../../workers/envs/webshop/mod.ts";
import { EnvOptionsError, InvalidTaskError } from "../../../workers/envs/errors.ts";
import { SPLITS } from "../../../workers/envs/types.ts";
import { wordsOf } from "../../../workers/envs/prompt.ts";
import { randomPolicy, runActions, runPolicy } from "./household_helpers.ts";

const goal: Goal = {
  type: "shampoo",
  category: "beauty",
  attributes: ["long lasting", "sulfate free"],
  options: { color: "blue", volume: "16 ounce" },
  priceBound: 40,
  sourceProductId: 0,
  instruction: "i need a long lasting and sulfate free shampoo with blue color and 16 ounce",
};

function product(overrides: Partial<Product>): Product {
  return {
    id: 0,
    title: "lumora long lasting shampoo",
    type: "shampoo",
    category: "beauty",
    brand: "lumora",
    attributes: ["long lasting", "sulfate free"],
    options: { color: ["blue", "red"], volume: ["8 ounce", "16 ounce"] },
    price: 30,
    ...overrides,
  };
}

Deno.test("the reward equals hand-computed WebShop scores", () => {
  const all = { color: "blue", volume: "16 ounce" };
  // Everything matches: (2 + 2 + 1) / 5.
  assert.equal(computeReward(goal, product({}), all).reward, 1);
  // One attribute, one option, price ok: (1 + 1 + 1) / 5 = 0.6.
  const partial = computeReward(goal, product({ attributes: ["long lasting", "vegan"] }), {
    color: "red",
    volume: "16 ounce",
  });
  assert.equal(partial.reward, 0.6);
  assert.deepEqual(partial.attributesMissing, ["sulfate free"]);
  assert.deepEqual(partial.optionsMissing, [
    { dimension: "color", wanted: "blue", selected: "red" },
  ]);
  // Price over the bound: (2 + 2 + 0) / 5 = 0.8.
  const pricey = computeReward(goal, product({ price: 41 }), all);
  assert.equal(pricey.reward, 0.8);
  assert.equal(pricey.priceOk, false);
  // Same category, other type: r_type 0.5 · (2 + 0 + 1) / 5 = 0.3 (no option selected).
  assert.ok(
    Math.abs(computeReward(goal, product({ type: "conditioner" }), {}).reward - 0.3) < 1e-12,
  );
  // Other category: r_type 0.1 · (0 + 0 + 1) / 5 = 0.02.
  const other = product({ type: "jeans", category: "fashion", attributes: ["cotton"] });
  assert.ok(Math.abs(computeReward(goal, other, {}).reward - 0.02) < 1e-12);
});

Deno.test("the catalog has at least 1,000 products and is the same on every load", () => {
  assert.ok(CATALOG.length >= 1000, `catalog has ${CATALOG.length}`);
  CATALOG.forEach((p, i) => assert.equal(p.id, i));
  assert.equal(CATALOG[0].title, CATALOG[0].title.toLowerCase());
  assert.ok(CATALOG.every((p) => wordsOf(p.title).length <= 6 && p.price > 0));
  const fingerprint = CATALOG.reduce((h, p) => (h * 31 + p.price + p.title.length) % 1e9, 7);
  assert.equal(typeof fingerprint, "number");
});

Deno.test("search ranks deterministically and finds a product by its title", () => {
  const target = CATALOG[123];
  const ids = searchCatalog(target.title, 20);
  assert.deepEqual(ids, searchCatalog(target.title, 20));
  assert.ok(ids.length <= 20);
  assert.ok(ids.slice(0, 5).includes(target.id));
  assert.ok(ids.slice(0, 5).every((id) => CATALOG[id].type === target.type));
  assert.deepEqual(searchCatalog("zzz qqq"), []);
});

Deno.test("sampleTasks is deterministic and rejects unknown options", () => {
  assert.deepEqual(env.sampleTasks("train", 30, 4), env.sampleTasks("train", 30, 4));
  assert.notDeepEqual(env.sampleTasks("train", 30, 5), env.sampleTasks("train", 30, 4));
  assert.throws(() => env.sampleTasks("train", 2, 1, { catalog: 3 }), EnvOptionsError);
  const task = env.sampleTasks("train", 1, 1)[0];
  assert.throws(() => env.createEpisode({ ...task, envId: "household" }), InvalidTaskError);
});

Deno.test("test_unseen asks only for held-out product types that train never asks for", () => {
  const typeOf = (split: (typeof SPLITS)[number]) =>
    new Set(env.sampleTasks(split, 300, 3).map((t) => webshopGoal(t).type));
  const train = typeOf("train");
  const seen = typeOf("test_seen");
  const unseen = typeOf("test_unseen");
  for (const t of unseen) assert.ok(UNSEEN_TYPES.has(t) && !train.has(t) && !seen.has(t), t);
  for (const t of train) assert.ok(!UNSEEN_TYPES.has(t), t);
  assert.equal(unseen.size, UNSEEN_TYPES.size);
});

Deno.test("the expert buys a fully matching item in at least 99% of 200 tasks per split", () => {
  for (const split of SPLITS) {
    let won = 0;
    for (const task of env.sampleTasks(split, 200, 17)) {
      const expert = env.createExpert(task);
      const trajectory = runPolicy(env, task, (obs) => expert.act(obs));
      if (trajectory.won) won++;
    }
    assert.ok(won >= 198, `${split}: expert won ${won}/200`);
  }
});

Deno.test("a random admissible-action policy scores far below the expert", () => {
  let won = 0;
  let score = 0;
  env.sampleTasks("train", 200, 8).forEach((task, i) => {
    const random = randomPolicy(i + 1);
    // On the search page the random policy types the instruction itself (a generous query).
    const trajectory = runPolicy(
      env,
      task,
      (obs) =>
        obs.admissibleActions?.[0]?.startsWith("search[")
          ? `search[${task.instruction}]`
          : random(obs),
    );
    if (trajectory.won) won++;
    score += trajectory.score;
  });
  console.log(`webshop random policy: ${won}/200 won, mean score ${(score / 200).toFixed(3)}`);
  assert.ok(won <= 20, `random won ${won}/200`);
  assert.ok(score / 200 < 0.6);
});

Deno.test("invalid and garbage actions are marked invalid and leave the page unchanged", () => {
  const task = env.sampleTasks("test_seen", 1, 2)[0];
  const episode = env.createEpisode(task);
  const start = episode.reset();
  for (
    const junk of ["", "buy", "click[buy now]", "search[]", "click[item 1]", "search[red", "🚀"]
  ) {
    const result = episode.step(junk);
    assert.equal(result.valid, false, junk);
    assert.equal(result.done, false);
    assert.deepEqual(result.observation.admissibleActions, start.admissibleActions);
  }
  const results = episode.step("Search[ Shampoo ]");
  assert.equal(results.valid, true);
  for (const junk of ["search[soap]", "click[item 99]", "click[blue]", "click[< prev]"]) {
    const result = episode.step(junk);
    assert.equal(result.valid, false, junk);
    assert.deepEqual(result.observation.admissibleActions, results.observation.admissibleActions);
    assert.ok(result.observation.text.startsWith("Invalid action. Results for"));
  }
  assert.ok(episode.step("click[next >]").observation.text.includes("page 2 of 4"));
  assert.ok(episode.step("click[< prev]").observation.text.includes("page 1 of 4"));
});

Deno.test("an unbought episode ends after the turn limit with score 0", () => {
  const task = env.sampleTasks("train", 1, 6)[0];
  const trajectory = runActions(env, task, Array(WEBSHOP_MAX_TURNS + 3).fill("click[nothing]"));
  assert.equal(trajectory.steps.length, WEBSHOP_MAX_TURNS);
  assert.equal(trajectory.won, false);
  assert.equal(trajectory.score, 0);
});

Deno.test("the vocabulary covers prompts, pages, actions and analyses", () => {
  const vocabulary = new Set(env.vocabulary());
  assert.ok(vocabulary.size < 2000, `vocabulary has ${vocabulary.size} words`);
  const missing = new Set<string>();
  const check = (text: string) => {
    for (const w of wordsOf(text)) if (!vocabulary.has(w)) missing.add(w);
  };
  SPLITS.forEach((split, k) => {
    env.sampleTasks(split, 40, 12).forEach((task, i) => {
      const expert = env.createExpert(task);
      const random = randomPolicy(100 * k + i);
      const runs = [
        runPolicy(env, task, (obs) => expert.act(obs)),
        runPolicy(
          env,
          task,
          (obs) =>
            obs.admissibleActions?.[0]?.startsWith("search[")
              ? `search[${task.instruction}]`
              : random(obs),
        ),
      ];
      for (const traj of runs) {
        check(task.instruction);
        for (const s of traj.steps) check(`${s.observation} ${s.action}`);
        const a = env.referenceAnalysis(traj);
        check(`${a.episode_summary} ${a.episode_skill}`);
        const observation = env.createEpisode(task).reset();
        check(
          env.buildPrompt({
            task,
            history: traj.steps,
            observation,
            historyLength: 2,
            turn: traj.steps.length + 1,
          }),
        );
      }
    });
  });
  assert.deepEqual([...missing], []);
});
