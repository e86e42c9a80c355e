import assert from "node:assert/strict";
import {
  connectHttpEnvironment,
  type Environment,
  getEnvironment,
  serveEnvironments,
  type Trajectory,
} from "../../../../workers/envs/mod.ts";

const sokoban = getEnvironment("sokoban");

/** A two-step trajectory of the first train task of `env` (walking left twice). */
function walkLeft(env: Environment): Trajectory {
  const task = env.sampleTasks("train", 1, 5)[0];
  const steps = ["left", "left"].map((a) => ({
    observation: "",
    response: `<action>${a}</action>`,
    action: a,
    valid: true,
    reward: -0.1,
  }));
  return { task, steps, won: false, score: -0.2 };
}

Deno.test("an HTTP environment judges skills like the in-process one", async () => {
  const server = await serveEnvironments([sokoban]);
  try {
    const remote = await connectHttpEnvironment(server.url);
    assert.ok(remote.judgeSkill, "the server advertises skill_judge in /v1/info");
    const t = walkLeft(sokoban);
    const truth = sokoban.referenceAnalysis(t).episode_skill;
    const untrue = "Look at the grid before moving; walking into a wall wastes a step.";
    const salad = "Never push a push a: a or or wall a a no target";
    for (const skill of [truth, untrue, salad]) {
      assert.deepEqual(await remote.judgeSkill(t, skill), sokoban.judgeSkill!(t, skill), skill);
    }
    assert.deepEqual(await remote.judgeSkill(t, truth), { wellFormed: true, truthful: true });
    const bad = await fetch(`${server.url}/v1/skill-judgement`, {
      method: "POST",
      body: JSON.stringify({ trajectory: t }),
    });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).detail, /skill/);
  } finally {
    await server.close();
  }
});

Deno.test("a served environment without a judge has no judgeSkill and no endpoint", async () => {
  const { judgeSkill: _, ...plain } = sokoban;
  const server = await serveEnvironments([plain as Environment]);
  try {
    const info = await (await fetch(`${server.url}/v1/info`)).json();
    assert.equal(info.skill_judge, false);
    const remote = await connectHttpEnvironment(server.url);
    assert.equal(remote.judgeSkill, undefined);
    const r = await fetch(`${server.url}/v1/skill-judgement`, {
      method: "POST",
      body: JSON.stringify({ trajectory: walkLeft(sokoban), skill: "x" }),
    });
    assert.equal(r.status, 404);
    await r.body?.cancel();
  } finally {
    await server.close();
  }
});
