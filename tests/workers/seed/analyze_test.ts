import assert from "node:assert/strict";
import { Corridor, corridorTask } from "./_corridor.ts";
import { asAsync, runRollouts } from "../../../workers/seed/rollout.ts";
import { buildSamples, teacherMask } from "../../../workers/seed/samples.ts";
import { analyzeTrajectories } from "../../../workers/seed/analyze.ts";
import {
  recordSkills,
  SkillLibrary,
  skillsByTrajectory,
  teacherPrompts,
} from "../../../workers/skills/mod.ts";
import { SeedOptionError } from "../../../workers/seed/errors.ts";

/** Rolls out 2 corridor tasks × 2 copies: copy 0 walks right (wins), copy 1 walks left (fails). */
async function rollouts() {
  return await runRollouts({
    env: asAsync(new Corridor()),
    tasks: [corridorTask(2), corridorTask(3)],
    groupSize: 2,
    maxTurns: 4,
    historyLength: 1,
    // Turn 1 alternates right/left by copy; later turns repeat the last action in the history.
    policy: (prompts) =>
      Promise.resolve(prompts.map((p, i) => {
        const last = /History: (\w+)/.exec(p)?.[1] ?? (i % 2 === 0 ? "right" : "left");
        return `<action>${last}</action>`;
      })),
  });
}

Deno.test("equal analyzer prompts are generated once and share their analysis", async () => {
  const base = await rollouts();
  // the two tasks' copies played twice over: b2g*/b3g* repeat b0g*/b1g* step for step
  const trajectories = [
    ...base,
    ...base.map((t) => ({ ...t, id: t.id.replace("b0", "b2").replace("b1", "b3") })),
  ];
  const calls: { prompts: string[]; ids: string[] }[] = [];
  const result = await analyzeTrajectories(trajectories, {
    mode: "all",
    generate: (prompts, selected) => {
      calls.push({ prompts, ids: selected.map((t) => trajectories.find((x) => x === t)!.id) });
      return Promise.resolve(
        prompts.map((_, i) => `{"episode_summary": "", "episode_skill": "Skill ${i}."}`),
      );
    },
  });
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0].ids, ["b0g0", "b0g1", "b1g0", "b1g1"]);
  assert.equal(new Set(calls[0].prompts).size, 4);
  assert.equal(result.analyzed, 8);
  assert.equal(result.parsed, 8);
  const skill = (id: string) => result.analyses.get(id)!.episode_skill;
  assert.deepEqual(
    ["b0g0", "b0g1", "b1g0", "b1g1", "b2g0", "b2g1", "b3g0", "b3g1"].map(skill),
    [
      "Skill 0.",
      "Skill 1.",
      "Skill 2.",
      "Skill 3.",
      "Skill 0.",
      "Skill 1.",
      "Skill 2.",
      "Skill 3.",
    ],
  );
  assert.equal(result.raw.get("b3g1"), result.raw.get("b1g1"));
});

Deno.test("the analyzer runs once over the failed trajectories and counts what parsed", async () => {
  const trajectories = await rollouts();
  assert.deepEqual(trajectories.map((t) => [t.id, t.won]), [
    ["b0g0", true],
    ["b0g1", false],
    ["b1g0", true],
    ["b1g1", false],
  ]);
  const calls: string[][] = [];
  const result = await analyzeTrajectories(trajectories, {
    mode: "failed_only",
    generate: (prompts) => {
      calls.push(prompts);
      return Promise.resolve([
        '```json\n{"episode_summary": "walked left", "episode_skill": "Never walk left.",}\n```',
        "I do not know.",
      ]);
    },
  });
  assert.equal(calls.length, 1);
  assert.equal(calls[0].length, 2);
  assert.ok(calls[0].every((p) => p.includes("Outcome: failure")));
  assert.ok(calls[0][0].includes("Your task is to: reach cell 2"));
  assert.equal(result.analyzed, 2);
  assert.equal(result.parsed, 1);
  assert.deepEqual([...result.analyses.keys()], ["b0g1", "b1g1"]);
  assert.equal(result.analyses.get("b0g1")!.episode_skill, "Never walk left.");
  assert.equal(result.analyses.get("b1g1"), null);
  assert.equal(result.raw.get("b1g1"), "I do not know.");

  // Only samples of b0g1 (parsed) get a teacher signal and a teacher prompt.
  const samples = buildSamples(trajectories, {
    rewardSource: "success",
    invalidPenalty: 0.1,
    estimator: "grpo",
    norm: "mean_std",
  });
  const skills = skillsByTrajectory(result.analyses);
  const mask = teacherMask(samples, skills);
  const prompts = teacherPrompts(samples, skills);
  samples.forEach((s, i) => {
    assert.equal(mask[i], s.trajectoryId === "b0g1" ? 1 : 0);
    if (mask[i] === 1) {
      assert.equal(
        prompts[i],
        s.prompt.replace(
          "Your task is to: reach cell 2\n",
          "Your task is to: reach cell 2\n\n**Episode-Level Skill**\nRefer to this episode-level skill when deciding what action to take in the current episode:\n[Never walk left.]\n\n",
        ),
      );
    } else {
      assert.equal(prompts[i], null);
    }
  });
  assert.equal(mask.reduce((a, b) => a + b, 0), 4); // b0g1 ran all 4 turns

  const library = new SkillLibrary("job-1");
  const added = recordSkills(library, {
    step: 2,
    trajectories,
    analyses: result.analyses,
    meanGaps: new Map([["b0g1", 0.3]]),
  });
  assert.equal(added, 1);
  const record = library.get("never walk left")!;
  assert.equal(record.meanTeacherGap, 0.3);
  assert.deepEqual(record.provenance, [{
    jobId: "job-1",
    step: 2,
    taskId: "corridor/train/2",
    family: "corridor",
    trajectoryId: "b0g1",
    success: false,
    meanTeacherGap: 0.3,
    source: "policy",
  }]);
});

Deno.test("analyzing nothing makes no generation call", async () => {
  const trajectories = (await rollouts()).filter((t) => t.won);
  let called = false;
  const result = await analyzeTrajectories(trajectories, {
    mode: "failed_only",
    generate: () => {
      called = true;
      return Promise.resolve([]);
    },
  });
  assert.equal(called, false);
  assert.equal(result.analyzed, 0);
});

Deno.test("a generator that returns the wrong number of completions is rejected", async () => {
  const trajectories = await rollouts();
  await assert.rejects(
    analyzeTrajectories(trajectories, { mode: "all", generate: () => Promise.resolve(["{}"]) }),
    SeedOptionError,
  );
});
