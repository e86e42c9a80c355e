import assert from "node:assert/strict";
import {
  EnvOptionsError,
  IMAGE_PLACEHOLDER,
  SPLITS,
  type Task,
} from "../../../../workers/envs/mod.ts";
import { wordsOf } from "../../../../workers/envs/prompt.ts";
import {
  EZPOINTS_IMAGE_SYSTEM_LINE,
  ezpointsEnvironment as env,
} from "../../../../workers/envs/ezpoints/mod.ts";
import {
  cardValue,
  comboKey,
  comboSplit,
  familyOf,
  rankSymbol,
} from "../../../../workers/envs/ezpoints/cards.ts";
import { parseObservationText } from "../../../../workers/envs/ezpoints/episode.ts";
import { isSolvable } from "../../../../workers/envs/ezpoints/solver.ts";
import { pixelAt } from "../../../../workers/envs/raster.ts";
import { rollout } from "../sokoban/_rollout.ts";
import { readCards } from "./_read_cards.ts";

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new Uint8Array(bytes));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function comboOf(task: Task): string {
  const obs = env.createEpisode(task).reset();
  return comboKey(parseObservationText(obs.text).hand.map((c) => c.rank));
}

Deno.test("options default to 2 cards as an image and bad options throw EnvOptionsError", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  assert.deepEqual(task.options, { render: "image", cards: 2 });
  assert.match(task.id, /^ezpoints\/train\/2c-image\/\d+$/);
  const [text] = env.sampleTasks("train", 1, 0, { render: "text" });
  assert.equal(text.id, task.id.replace("2c-image", "2c-text"));
  for (const bad of [{ cards: 1 }, { cards: 5 }, { render: "svg" }, { target: 24 }]) {
    assert.throws(() => env.sampleTasks("train", 1, 0, bad), EnvOptionsError);
  }
  assert.deepEqual(env.sampleTasks("test_unseen", 5, 9), env.sampleTasks("test_unseen", 5, 9));
});

Deno.test("held-out rank combinations never occur in train or test_seen, for 2, 3 and 4 cards", () => {
  for (const cards of [2, 3, 4]) {
    const split = comboSplit(cards);
    const train = new Set(split.train.map(comboKey));
    assert.ok(split.unseen.length >= 1);
    for (const ranks of split.unseen) assert.ok(!train.has(comboKey(ranks)));
    const trainRanks = new Set(split.train.flat());
    const trainFamilies = new Set(split.train.map((r) => familyOf(r.map(cardValue))));
    for (const ranks of split.unseen) {
      for (const r of ranks) assert.ok(trainRanks.has(r), `rank ${r} only held out`);
      assert.ok(trainFamilies.has(familyOf(ranks.map(cardValue))));
    }
    for (const ranks of [...split.train, ...split.unseen]) {
      assert.ok(isSolvable(ranks.map(cardValue)), `${ranks} unsolvable`);
    }
  }
  assert.deepEqual(comboSplit(2).unseen, [[2, 6]]);
});

Deno.test("dealt unseen hands are disjoint from dealt train and test_seen hands", () => {
  const options = { cards: 3, render: "text" };
  const seen = new Set(
    [...env.sampleTasks("train", 300, 1, options), ...env.sampleTasks("test_seen", 300, 1, options)]
      .map(comboOf),
  );
  const unseen = env.sampleTasks("test_unseen", 200, 1, options).map(comboOf);
  for (const combo of unseen) assert.ok(!seen.has(combo), `${combo} dealt in training`);
  assert.ok(new Set(unseen).size > 5, "many held-out combinations are dealt");
  const train = env.sampleTasks("train", 50, 3).map(comboOf);
  assert.ok(!train.includes("2-6"));
  assert.ok(env.sampleTasks("test_unseen", 20, 3).every((t) => comboOf(t) === "2-6"));
});

Deno.test("the image shows exactly the cards the observation text names", () => {
  for (const cards of [2, 3, 4]) {
    for (const task of env.sampleTasks("train", 40, 5, { cards })) {
      const obs = env.createEpisode(task).reset();
      const { hand } = parseObservationText(obs.text);
      assert.equal(obs.image!.width, cards * 48 + 8);
      assert.equal(obs.image!.height, 72);
      const seen = readCards(obs.image!, cards);
      assert.deepEqual(
        seen,
        hand.map((c) => ({
          rank: rankSymbol(c.rank),
          suit: c.suit,
          ink: c.suit === "hearts" || c.suit === "diamonds" ? "red" : "black",
        })),
      );
    }
  }
});

Deno.test("the same task renders identical bytes, pinned by their SHA-256", async () => {
  const [task] = env.sampleTasks("train", 1, 0);
  const a = env.createEpisode(task).reset();
  const b = env.createEpisode(env.sampleTasks("train", 1, 0)[0]).reset();
  assert.deepEqual(a.image!.rgb, b.image!.rgb);
  assert.equal(a.text, "Cards: 5 of diamonds, 7 of diamonds.\nCurrent formula: (empty)");
  assert.deepEqual(pixelAt(a.image!, 0, 0), [53, 101, 77]);
  assert.equal(
    await sha256(a.image!.rgb),
    "c1f117733b7697cb8eef029ac879a6d35bbdcc8597a22faef99ce27c1c11ae77",
  );
});

Deno.test("render text carries no image and names the cards in the prompt", () => {
  const [task] = env.sampleTasks("train", 1, 0, { render: "text" });
  const obs = env.createEpisode(task).reset();
  assert.equal(obs.image, undefined);
  const prompt = env.buildPrompt({
    task,
    history: [],
    observation: obs,
    historyLength: 2,
    turn: 1,
  });
  assert.ok(prompt.includes(obs.text.split("\n")[0]));
  assert.ok(!prompt.includes(IMAGE_PLACEHOLDER));
});

Deno.test("the image prompt shows <image> once, keeps the formula as text and never the cards", () => {
  const [task] = env.sampleTasks("train", 1, 8);
  const episode = env.createEpisode(task);
  const expert = env.createExpert(task);
  let obs = episode.reset();
  const history = [];
  for (let turn = 1; turn <= 3; turn++) {
    const action = expert.act(obs);
    const r = episode.step(action);
    history.push({ observation: obs.text, response: action, action, valid: r.valid, reward: 0 });
    obs = r.observation;
  }
  const prompt = env.buildPrompt({ task, history, observation: obs, historyLength: 2, turn: 4 });
  assert.equal(prompt.split("\n")[0], EZPOINTS_IMAGE_SYSTEM_LINE);
  assert.equal(prompt.split(IMAGE_PLACEHOLDER).length, 2);
  assert.ok(!prompt.includes("Cards:"), prompt);
  assert.match(prompt, /current observation is:\n<image>\nCurrent formula: \d+ [-+*\/] \d+\n/);
  assert.match(prompt, /\[Observation 2: Current formula: \d+, Action 2: [-+*\/]\]/);
  assert.match(prompt, /admissible actions of the current situation are: \[=\]/);
  const vocabulary = new Set(env.vocabulary());
  assert.ok(vocabulary.has(IMAGE_PLACEHOLDER));
  for (const word of wordsOf(prompt)) assert.ok(vocabulary.has(word), `missing ${word}`);
});

Deno.test("rewards: 0 per token, -1 for an inadmissible one (formula unchanged), +10 for 12", () => {
  const [task] = env.sampleTasks("train", 1, 0, { render: "text" });
  const episode = env.createEpisode(task);
  const { hand } = parseObservationText(episode.reset().text);
  const [a, b] = hand.map((c) => String(cardValue(c.rank)));
  const op = Number(a) + Number(b) === 12 ? "+" : "*";
  const bad = episode.step("+");
  assert.deepEqual([bad.reward, bad.valid, bad.done, bad.info.error], [
    -1,
    false,
    false,
    "misplaced",
  ]);
  assert.match(bad.observation.text, /Current formula: \(empty\)$/);
  assert.deepEqual(episode.step(a).reward, 0);
  assert.equal(
    episode.step(a === b ? "9" : a).info.error,
    a === b ? "number_not_on_cards" : "number_reused",
  );
  assert.equal(episode.step(op).reward, 0);
  assert.equal(episode.step(b).reward, 0);
  const end = episode.step("=");
  assert.deepEqual([end.reward, end.done, end.won, end.info.value], [10, true, true, "12"]);
  assert.deepEqual(end.observation.admissibleActions, []);
  const after = episode.step("=");
  assert.deepEqual([after.reward, after.valid, after.done, after.won], [0, false, true, true]);
});

Deno.test("= submits and ends the episode: too early or a wrong value is -1 and lost", () => {
  const [task] = env.sampleTasks("train", 1, 0, { render: "text" });
  const episode = env.createEpisode(task);
  episode.reset();
  const early = episode.step("=");
  assert.deepEqual([early.reward, early.done, early.won, early.info.error], [
    -1,
    true,
    false,
    "empty",
  ]);
  const obs = episode.reset();
  const [a, b] = parseObservationText(obs.text).hand.map((c) => String(cardValue(c.rank)));
  episode.step(a);
  assert.equal(episode.step("=").info.error, "cards_unused");
  episode.reset();
  for (const t of [a, "-", b]) episode.step(t);
  const wrong = episode.step("=");
  assert.deepEqual([wrong.reward, wrong.won, wrong.info.value], [
    -1,
    false,
    String(Number(a) - Number(b)),
  ]);
});

for (const split of SPLITS) {
  Deno.test(`the expert solves at least 99% of 200 ${split} tasks (2 cards, image)`, () => {
    const tasks = env.sampleTasks(split, 200, 2026);
    let won = 0;
    for (const task of tasks) {
      const expert = env.createExpert(task);
      if (rollout(env, task, (obs) => `<action>${expert.act(obs)}</action>`).won) won++;
    }
    assert.ok(won / tasks.length >= 0.99, `expert success ${won / tasks.length}`);
  });
}

Deno.test("the expert also solves 3- and 4-card hands of every split within the turn limit", () => {
  for (const cards of [3, 4]) {
    for (const split of SPLITS) {
      const tasks = env.sampleTasks(split, 40, 7, { cards, render: "text" });
      for (const task of tasks) {
        const expert = env.createExpert(task);
        assert.ok(rollout(env, task, (obs) => expert.act(obs)).won, task.id);
      }
    }
  }
});

Deno.test("tasks carry the family of their hand and every family occurs", () => {
  const tasks = env.sampleTasks("train", 300, 4, { cards: 3 });
  for (const task of tasks.slice(0, 20)) {
    const { hand } = parseObservationText(env.createEpisode(task).reset().text);
    assert.equal(task.family, familyOf(hand.map((c) => cardValue(c.rank))));
  }
  assert.deepEqual(new Set(tasks.map((t) => t.family)), new Set(env.families));
});

Deno.test("the expert refuses observations with more cards or formula tokens than a game can show", () => {
  const [task] = env.sampleTasks("train", 1, 0);
  const aces = (n: number) => Array.from({ length: n }, () => "ace of hearts").join(", ");
  // 7 cards: the solver's search is exponential in the cards (it ran for minutes); a huge
  // formula made every search step re-read it.
  const texts = [
    `Cards: ${aces(7)}.\nCurrent formula: ${Array(7).fill("1").join(" - ")}`,
    `Cards: ${aces(1)}.\nCurrent formula: (empty)`,
    `Cards: ${aces(2)}.\nCurrent formula: ${Array(10_000).fill("(").join(" ")} 1`,
  ];
  for (const text of texts) {
    assert.throws(
      () => env.createExpert(task).act({ text }),
      (e: Error) =>
        e.name === "ObservationParseError" && /at most 64 tokens|2 to 4 cards/.test(e.message),
    );
  }
  const four = parseObservationText(`Cards: ${aces(4)}.\nCurrent formula: ( 1 + 1`);
  assert.deepEqual([four.hand.length, four.tokens], [4, ["(", "1", "+", "1"]]);
});
