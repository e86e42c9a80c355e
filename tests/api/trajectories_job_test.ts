import assert from "node:assert/strict";
import { getJob } from "../../jobs/mod.ts";
import { runOne, testWorker, tinySpec, trainerRegistry } from "../workers/seed/_jobs.ts";
import { req, startApiFixture } from "./_fixture.ts";

interface Turn {
  turn: number;
  observation: string;
  response: string;
  action: string;
  valid: boolean;
  reward: number;
  image: unknown;
}
interface Traj {
  source: string;
  id: string;
  task_id: string;
  split: string;
  family: string;
  group: number;
  copy: number;
  won: boolean;
  score: number;
  reward_sum: number;
  turns: number;
  steps: Turn[];
}

Deno.test("a 2-step job's trajectories and evaluations are served by step", async (t) => {
  const fx = await startApiFixture();
  try {
    // 2 tasks × 2 copies per update, ≤ 3 turns; evaluation of 2 episodes on each of 2 splits at
    // steps 0 (after warm-up), 1 and 2 (eval_every 1).
    const spec = tinySpec({ method: "grpo" });
    const submitted = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
    assert.equal(submitted.status, 201);
    const jobId = (await submitted.json()).id;
    const worker = testWorker(fx.db, fx.store, trainerRegistry());
    const outcome = await runOne(worker);
    const job = await getJob(fx.db, { tenantId: fx.tenantA.id, jobId });
    assert.equal(outcome, "succeeded", job?.error ?? "");
    const base = `/v1/jobs/${jobId}/trajectories`;

    await t.step(
      "the listing has rollouts at steps 1 and 2 and evaluations at 0, 1, 2",
      async () => {
        const { steps } = await (await req(fx.app, "GET", base, { key: fx.keyA })).json();
        assert.deepEqual(
          steps.map((s: { step: number; rollout: unknown; eval: unknown }) => [
            s.step,
            s.rollout !== null,
            s.eval !== null,
          ]),
          [[0, false, true], [1, true, true], [2, true, true]],
        );
        assert.equal(steps[1].rollout.trajectories, 4);
        assert.equal(steps[2].eval.trajectories, 4);
      },
    );

    for (const step of [1, 2]) {
      await t.step(`step ${step} holds every group's rollouts, turn by turn`, async () => {
        const res = await req(fx.app, "GET", `${base}?step=${step}&split=train`, { key: fx.keyA });
        assert.equal(res.status, 200);
        const body = await res.json();
        assert.deepEqual(body.totals, { rollout: 4, eval: 4 });
        const list = body.trajectories as Traj[];
        assert.deepEqual(list.map((x) => [x.source, x.group, x.copy]), [
          ["rollout", 0, 0],
          ["rollout", 0, 1],
          ["rollout", 1, 0],
          ["rollout", 1, 1],
        ]);
        for (const x of list) {
          assert.equal(x.id, `step-${step}/b${x.group}g${x.copy}`);
          assert.match(x.task_id, /^sokoban\/train\//);
          assert.equal(x.family, "sokoban");
          assert.ok(x.turns >= 1 && x.turns <= 3, `turns ${x.turns}`);
          assert.equal(x.steps.length, x.turns);
          const sum = x.steps.reduce((s, turn) => s + turn.reward, 0);
          assert.ok(Math.abs(x.reward_sum - sum) < 1e-9);
          assert.equal(x.won, x.score >= 10);
          for (const [k, turn] of x.steps.entries()) {
            assert.equal(turn.turn, k + 1);
            assert.match(turn.observation, /#/); // the text grid
            assert.equal(typeof turn.response, "string");
            assert.equal(turn.image, null); // text sokoban has no images
          }
        }
        // The two copies of a group play the same task.
        assert.equal(list[0].task_id, list[1].task_id);
      });
    }

    await t.step("an evaluation step holds both splits' results and episodes", async () => {
      const res = await req(fx.app, "GET", `${base}?step=0`, { key: fx.keyA });
      const body = await res.json();
      assert.deepEqual(body.totals, { rollout: null, eval: 4 });
      assert.deepEqual(
        body.eval.map((s: { split: string; episodes: number }) => [
          s.split,
          s.episodes,
        ]),
        [["test_seen", 2], ["test_unseen", 2]],
      );
      const splits = (body.trajectories as Traj[]).map((x) => `${x.source}/${x.split}`);
      assert.deepEqual(splits, [
        "eval/test_seen",
        "eval/test_seen",
        "eval/test_unseen",
        "eval/test_unseen",
      ]);
      const seen = body.eval[0] as { success_rate: number };
      const won = (body.trajectories as Traj[]).filter((x) => x.split === "test_seen" && x.won);
      assert.equal(seen.success_rate, won.length / 2);
    });
  } finally {
    await fx.close();
  }
});
