import assert from "node:assert/strict";
import {
  connectHttpEnvironment,
  type Environment,
  getEnvironment,
  serveEnvironments,
  type SkillJudgement,
  type Trajectory,
} from "../../../../workers/envs/mod.ts";
import { analyzeHousehold } from "../../../../workers/envs/household/analyzer.ts";
import {
  HOUSEHOLD_MAX_TURNS,
  HouseholdEpisode,
  householdScenario,
} from "../../../../workers/envs/household/mod.ts";

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
    assert.deepEqual(await remote.judgeSkill(t, truth), {
      wellFormed: true,
      truthful: true,
      matchesReference: true,
    });
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

Deno.test("a household failure skill true of its trajectory, not the reference's, crosses HTTP as such", async () => {
  const household = getEnvironment("household");
  const server = await serveEnvironments([household]);
  try {
    const remote = await connectHttpEnvironment(server.url);
    const task = household.sampleTasks("train", 1, 2, { families: ["pick_and_place"] })[0];
    const steps = Array.from({ length: household.defaultMaxTurns }, () => ({
      observation: "",
      response: "<action>look</action>",
      action: "look",
      valid: true,
      reward: 0,
    }));
    const t: Trajectory = { task, steps, won: false, score: 0 };
    // The replay analysis' failure skill (the reference's is the usual places).
    const episode = new HouseholdEpisode(task, householdScenario(task), HOUSEHOLD_MAX_TURNS);
    const reference = analyzeHousehold(t, episode).analysis.episode_skill;
    assert.match(reference, /never found a/);
    // The same mistake with the goal objects' places listed from the last.
    const swapped = reference.replace(
      /which was in (.*?): it never visited (.*?)\. Instead/,
      (_, where: string, unvisited: string) =>
        `which was in ${where.split(" and ").reverse().join(" and ")}: it never visited ${
          unvisited.split(" or ").reverse().join(" or ")
        }. Instead`,
    );
    // Task 2's two cloths lie in two receptacles, so the order differs.
    assert.notEqual(swapped, reference);
    const expected = { wellFormed: true, truthful: true, matchesReference: false };
    assert.deepEqual(household.judgeSkill!(t, swapped), expected);
    assert.deepEqual(await remote.judgeSkill!(t, swapped), expected);
  } finally {
    await server.close();
  }
});

Deno.test("a client reads an older server's truthful as the reference match", async () => {
  // Servers older than `matches_reference` answer {well_formed, truthful} only.
  const older: Environment = {
    ...sokoban,
    judgeSkill(trajectory, skill) {
      const { matchesReference: _, ...answer } = sokoban.judgeSkill!(trajectory, skill);
      return answer as SkillJudgement;
    },
  };
  const server = await serveEnvironments([older]);
  try {
    const remote = await connectHttpEnvironment(server.url);
    const t = walkLeft(sokoban);
    const raw = await fetch(`${server.url}/v1/skill-judgement`, {
      method: "POST",
      body: JSON.stringify({ trajectory: t, skill: "x" }),
    });
    assert.deepEqual(await raw.json(), { well_formed: false, truthful: false });
    const truth = sokoban.referenceAnalysis(t).episode_skill;
    assert.deepEqual(await remote.judgeSkill!(t, truth), {
      wellFormed: true,
      truthful: true,
      matchesReference: true,
    });
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
