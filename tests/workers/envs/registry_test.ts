import assert from "node:assert/strict";
import {
  environmentIds,
  getEnvironment,
  listEnvironments,
  resolveEnvironment,
  UnknownEnvironmentError,
} from "../../../workers/envs/mod.ts";

Deno.test("the registry lists sokoban, household, webshop, ezpoints and search with distinct ids", () => {
  const ids = environmentIds();
  assert.deepEqual(ids, ["sokoban", "household", "webshop", "ezpoints", "search"]);
  assert.equal(new Set(ids).size, ids.length);
  assert.deepEqual(listEnvironments().map((e) => e.id), ids);
  for (const id of ids) assert.equal(getEnvironment(id).id, id);
});

Deno.test("an unknown id throws UnknownEnvironmentError listing the known ids", () => {
  assert.throws(() => getEnvironment("chess"), (e: unknown) => {
    assert.ok(e instanceof UnknownEnvironmentError);
    assert.equal(e.envId, "chess");
    assert.match(e.message, /must be one of sokoban, household, webshop, ezpoints, search/);
    return true;
  });
});

Deno.test("every registered environment samples, steps, prompts and analyses through the async view", async () => {
  for (const id of environmentIds()) {
    const env = await resolveEnvironment(id);
    const [task] = await env.sampleTasks("train", 1, 3);
    assert.equal(task.envId, id);
    const episode = env.createEpisode(task);
    const obs = await episode.reset();
    const expert = env.createExpert(task);
    const action = await expert.act(obs);
    const r = await episode.step(action);
    assert.equal(r.valid, true, `${id}: expert action ${action} invalid`);
    const prompt = await env.buildPrompt({
      task,
      history: [],
      observation: obs,
      historyLength: 2,
      turn: 1,
    });
    assert.match(prompt, /\nYour task is to: /);
    assert.equal(await env.parseAction(`<action>${action}</action>`), action);
    const a = await env.referenceAnalysis({
      task,
      won: r.won,
      score: r.reward,
      steps: [{
        observation: obs.text,
        response: action,
        action,
        valid: r.valid,
        reward: r.reward,
      }],
    });
    assert.ok(a.episode_skill.length > 0);
    assert.ok((await env.vocabulary()).length > 50);
    await episode.close();
    await expert.close();
  }
});

Deno.test("the async view rejects bad options with EnvOptionsError", async () => {
  const env = await resolveEnvironment("sokoban");
  await assert.rejects(() => env.sampleTasks("train", 1, 0, { size: 3 }), {
    name: "EnvOptionsError",
  });
});
