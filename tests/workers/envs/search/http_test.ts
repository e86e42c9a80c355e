import assert from "node:assert/strict";
import {
  connectHttpEnvironment,
  EnvOptionsError,
  serveEnvironments,
  toAsyncEnvironment,
} from "../../../../workers/envs/mod.ts";
import type { AsyncEnvironment, Task } from "../../../../workers/envs/mod.ts";
import { searchEnvironment } from "../../../../workers/envs/search/mod.ts";

/** Plays the expert of `expertEnv` on `env`, with an invalid action first; all results as JSON. */
async function playExpert(env: AsyncEnvironment, expertEnv: AsyncEnvironment, task: Task) {
  const episode = env.createEpisode(task);
  const expert = expertEnv.createExpert(task);
  let observation = await episode.reset();
  const out: unknown[] = [observation, await episode.step("Paford")];
  const steps = [];
  for (let turn = 0; turn < 4; turn++) {
    const action = await expert.act(observation);
    const result = await episode.step(action);
    out.push(result);
    steps.push({
      observation: observation.text,
      response: `<action>${action}</action>`,
      action,
      valid: result.valid,
      reward: result.reward,
    });
    observation = result.observation;
    if (result.done) break;
  }
  await Promise.all([episode.close(), expert.close()]);
  return { out, steps };
}

Deno.test("search served over HTTP gives the same tasks, episodes, prompts and analyses", async () => {
  const server = await serveEnvironments([searchEnvironment]);
  try {
    const local = toAsyncEnvironment(searchEnvironment);
    const remote = await connectHttpEnvironment(server.url);
    assert.equal(remote.id, "search");
    assert.equal(remote.defaultMaxTurns, 4);
    assert.deepEqual(remote.families, ["single_hop", "bridge", "comparison"]);
    assert.deepEqual(remote.optionsJsonSchema, local.optionsJsonSchema);
    const options = { families: ["bridge", "comparison"], top_k: 2, prompt: "compact" };
    const tasks = await remote.sampleTasks("test_unseen", 4, 99, options);
    assert.deepEqual(tasks, await local.sampleTasks("test_unseen", 4, 99, options));
    for (const task of tasks) {
      const there = await playExpert(remote, remote, task);
      const here = await playExpert(local, local, task);
      assert.deepEqual(there.out, here.out);
      const last = here.out.at(-1) as { won: boolean; reward: number };
      assert.equal(last.won, true);
      const trajectory = { task, won: true, score: last.reward, steps: here.steps };
      assert.deepEqual(
        await remote.referenceAnalysis(trajectory),
        await local.referenceAnalysis(trajectory),
      );
      const input = {
        task,
        history: here.steps.slice(0, 1),
        observation: { text: here.steps[1].observation },
        historyLength: 1,
        turn: 2,
      };
      assert.equal(await remote.buildPrompt(input), await local.buildPrompt(input));
    }
    assert.equal(
      await remote.parseAction("<think>x</think><action><search> Jemi Shonland </search>"),
      "<search>Jemi Shonland</search>",
    );
    assert.deepEqual(await remote.vocabulary(), await local.vocabulary());
    await assert.rejects(() => remote.sampleTasks("train", 1, 0, { top_k: 9 }), (e: unknown) => {
      assert.ok(e instanceof EnvOptionsError);
      assert.deepEqual(e.issues[0].path, ["top_k"]);
      return true;
    });
  } finally {
    await server.close();
  }
});
