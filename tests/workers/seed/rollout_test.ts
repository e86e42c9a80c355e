import assert from "node:assert/strict";
import { Corridor, corridorTask } from "./_corridor.ts";
import {
  asAsync,
  type AsyncEnvironmentLike,
  type AsyncEpisodeLike,
  runRollouts,
} from "../../../workers/seed/rollout.ts";
import { RolloutError } from "../../../workers/seed/errors.ts";
import { buildSamples } from "../../../workers/seed/samples.ts";

/** A scripted policy that records every call; `act` picks the response for one prompt. */
function scripted(act: (prompt: string, index: number, call: number) => string) {
  const calls: string[][] = [];
  const policy = (prompts: string[]) => {
    calls.push(prompts);
    return Promise.resolve(prompts.map((p, i) => act(p, i, calls.length)));
  };
  return { calls, policy };
}

Deno.test("episodes leave when done and each turn makes one policy call with all live episodes", async () => {
  const { calls, policy } = scripted(() => "<action>right</action>");
  const trajectories = await runRollouts({
    env: asAsync(new Corridor()),
    tasks: [corridorTask(2), corridorTask(3)],
    groupSize: 2,
    maxTurns: 10,
    historyLength: 2,
    policy,
  });
  assert.deepEqual(calls.map((c) => c.length), [4, 4, 2]);
  assert.deepEqual(trajectories.map((t) => [t.id, t.steps.length, t.won, t.truncated]), [
    ["b0g0", 2, true, false],
    ["b0g1", 2, true, false],
    ["b1g0", 3, true, false],
    ["b1g1", 3, true, false],
  ]);
  // Prompts are ordered by (task, copy) among the live episodes.
  assert.ok(calls[0][0].startsWith("Your task is to: reach cell 2"));
  assert.ok(calls[0][2].startsWith("Your task is to: reach cell 3"));
  assert.ok(calls[2].every((p) => p.includes("reach cell 3") && p.includes("turn 3")));
  const t = trajectories[2];
  assert.deepEqual(t.steps.map((s) => s.observation), [
    "You are in cell 0 of 3.",
    "You are in cell 1 of 3.",
    "You are in cell 2 of 3.",
  ]);
  assert.deepEqual(t.steps.map((s) => s.reward), [-0.1, -0.1, 10]);
  assert.ok(Math.abs(t.score - 9.8) < 1e-12);
  assert.equal(t.steps[2].prompt, calls[2][0]);
  assert.equal(t.steps[2].response, "<action>right</action>");
});

Deno.test("invalid and unparseable actions count as turns without crashing", async () => {
  const stepped: string[] = [];
  const corridor = asAsync(new Corridor());
  const env: AsyncEnvironmentLike = {
    ...corridor,
    createEpisode: async (task) => {
      const inner = await corridor.createEpisode(task);
      return { ...inner, step: (a: string) => (stepped.push(a), inner.step(a)) };
    },
  };
  // Copy 0: "dance" (parsed, inadmissible), then no action tags at all, then right, right.
  // Copy 1: right, right.
  const { calls, policy } = scripted((_, i, call) => {
    if (i === 1 || call > 2) return "<action>right</action>";
    return call === 1 ? "<action>dance</action>" : "I am not sure.";
  });
  const [first, second] = await runRollouts({
    env,
    tasks: [corridorTask(2)],
    groupSize: 2,
    maxTurns: 10,
    historyLength: 5,
    policy,
  });
  assert.deepEqual(first.steps.map((s) => [s.action, s.valid, s.reward]), [
    ["dance", false, 0],
    ["", false, 0],
    ["right", true, -0.1],
    ["right", true, 10],
  ]);
  assert.equal(first.won, true);
  assert.equal(second.steps.length, 2);
  assert.deepEqual(calls.map((c) => c.length), [2, 2, 1, 1]);
  // The unparseable turn did not step the environment; the invalid one did.
  assert.deepEqual(stepped, ["dance", "right", "right", "right", "right"]);
  // History shows the unparseable turn as "?" and the state did not change.
  assert.ok(calls[2][0].includes("History: dance,?\nYou are in cell 0 of 2."));
});

Deno.test("episodes that never finish stop at maxTurns and are marked truncated", async () => {
  const { calls, policy } = scripted(() => "<action>left</action>");
  const trajectories = await runRollouts({
    env: asAsync(new Corridor()),
    tasks: [corridorTask(2)],
    groupSize: 3,
    maxTurns: 4,
    historyLength: 1,
    policy,
    idPrefix: "step-7/",
  });
  assert.equal(calls.length, 4);
  for (const t of trajectories) {
    assert.equal(t.steps.length, 4);
    assert.equal(t.won, false);
    assert.equal(t.truncated, true);
    assert.ok(Math.abs(t.score - -0.4) < 1e-12);
  }
  assert.deepEqual(trajectories.map((t) => t.id), ["step-7/b0g0", "step-7/b0g1", "step-7/b0g2"]);
  // historyLength 1 shows only the previous action.
  assert.ok(calls[3][0].includes("History: left\n"));
});

Deno.test("a final info.score replaces the sum of rewards", async () => {
  const corridor = asAsync(new Corridor());
  const env: AsyncEnvironmentLike = {
    ...corridor,
    createEpisode: async (task) => {
      const inner = await corridor.createEpisode(task);
      return {
        ...inner,
        step: async (a: string) => ({ ...(await inner.step(a)), info: { score: 0.75 } }),
      };
    },
  };
  const [t] = await runRollouts({
    env,
    tasks: [corridorTask(1)],
    groupSize: 1,
    maxTurns: 3,
    historyLength: 0,
    policy: (p) => Promise.resolve(p.map(() => "<action>right</action>")),
  });
  assert.equal(t.score, 0.75);
});

Deno.test("a policy that returns the wrong number of responses stops the rollout and closes episodes", async () => {
  let closed = 0;
  const corridor = asAsync(new Corridor());
  const env: AsyncEnvironmentLike = {
    ...corridor,
    createEpisode: async (task): Promise<AsyncEpisodeLike> => ({
      ...(await corridor.createEpisode(task)),
      close: () => {
        closed++;
      },
    }),
  };
  await assert.rejects(
    runRollouts({
      env,
      tasks: [corridorTask(2)],
      groupSize: 2,
      maxTurns: 3,
      historyLength: 0,
      policy: () => Promise.resolve(["<action>right</action>"]),
    }),
    (error: unknown) => error instanceof RolloutError && error.turn === 1,
  );
  assert.equal(closed, 2);
});

Deno.test("an aborted signal stops the rollout between turns", async () => {
  const controller = new AbortController();
  const { calls, policy } = scripted(() => {
    controller.abort(new Error("cancelled"));
    return "<action>left</action>";
  });
  await assert.rejects(
    runRollouts({
      env: asAsync(new Corridor()),
      tasks: [corridorTask(2)],
      groupSize: 1,
      maxTurns: 5,
      historyLength: 0,
      policy,
      signal: controller.signal,
    }),
    /cancelled/,
  );
  assert.equal(calls.length, 1);
});

Deno.test("a synchronous environment also satisfies the interface directly", async () => {
  const trajectories = await runRollouts({
    env: new Corridor(),
    tasks: [corridorTask(1)],
    groupSize: 1,
    maxTurns: 2,
    historyLength: 0,
    policy: (p) => Promise.resolve(p.map(() => "<action>right</action>")),
  });
  assert.equal(trajectories[0].won, true);
});

Deno.test("response ids a policy reports stay with their turns and become the samples' ids", async () => {
  let call = 0;
  const policy = (prompts: string[]) => {
    call++;
    return Promise.resolve({
      texts: prompts.map(() => "<action>right</action>"),
      responseIds: prompts.map((_, i) => [100 + call, i, 7]),
    });
  };
  const trajectories = await runRollouts({
    env: asAsync(new Corridor()),
    tasks: [corridorTask(2)],
    groupSize: 2,
    maxTurns: 5,
    historyLength: 0,
    policy,
  });
  assert.deepEqual(trajectories[1].steps.map((s) => s.responseIds), [[101, 1, 7], [102, 1, 7]]);
  assert.deepEqual(trajectories[1].steps.map((s) => s.response), [
    "<action>right</action>",
    "<action>right</action>",
  ]);
  const samples = buildSamples(trajectories, {
    rewardSource: "score",
    invalidPenalty: 0.1,
    estimator: "grpo",
    norm: "mean_std",
  });
  assert.deepEqual(samples.map((s) => s.responseIds), [
    [101, 0, 7],
    [102, 0, 7],
    [101, 1, 7],
    [102, 1, 7],
  ]);
  const bad = () => Promise.resolve({ texts: ["<action>right</action>"], responseIds: [] });
  await assert.rejects(
    runRollouts({
      env: asAsync(new Corridor()),
      tasks: [corridorTask(2)],
      groupSize: 1,
      maxTurns: 1,
      historyLength: 0,
      policy: bad,
    }),
    RolloutError,
  );
});
