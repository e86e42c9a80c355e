import assert from "node:assert/strict";
import {
  claimJob,
  commitStep,
  FenceLostError,
  fenceOf,
  getSkillLibrary,
  getTrajectoryDumps,
  listCheckpoints,
  listEvents,
  listMetrics,
  readCheckpointFile,
  reapExpiredLeases,
  stepRecord,
  submitJob,
} from "../../jobs/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";
import { startTestStore } from "../_harness/s3.ts";

const text = (s: string) => new TextEncoder().encode(s);

Deno.test("one commit per step", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const store = s3.store;
  const tenantId = await createTenant(db);
  const claim = async (workerId: string) => {
    await submitJob(db, { tenantId, spec: testSpec() });
    const job = (await claimJob(db, { workerId, device: "cpu", leaseMs: 60_000 }))!;
    return { job, writer: { fence: fenceOf(job), tenantId } };
  };
  const everything = (step: number) => ({
    metrics: { loss: 0.5 + step },
    checkpoint: [{ name: "trainer_state.json", bytes: text(`{"step":${step}}`) }],
    skills: { json: { skills: ["a", "b"] }, skillCount: 2 },
    trajectories: [{
      step,
      kind: "rollout" as const,
      json: { trajectories: [] },
      trajectoryCount: 0,
      images: [],
    }],
    events: [
      { type: "step", data: { step }, key: `step-${step}` },
      { type: "checkpoint", data: { step }, key: `checkpoint-${step}` },
    ],
  });
  try {
    await t.step(
      "a step's metrics, checkpoint, skills, dumps and events appear together",
      async () => {
        const { job, writer } = await claim("w1");
        const empty = { metrics: false, checkpoint: false, skills: false };
        assert.deepEqual(await stepRecord(db, job.id, 3), {
          ...empty,
          trajectories: [],
          events: [],
        });
        await commitStep(db, store, writer, 3, everything(3));
        assert.deepEqual(await stepRecord(db, job.id, 3), {
          metrics: true,
          checkpoint: true,
          skills: true,
          trajectories: ["rollout"],
          events: ["checkpoint", "step"],
        });
        const [ck] = await listCheckpoints(db, job.id);
        assert.equal(
          new TextDecoder().decode(await readCheckpointFile(store, ck, "trainer_state.json")),
          '{"step":3}',
        );
        assert.equal((await getSkillLibrary(db, job.id, 3))?.skillCount, 2);
        assert.equal((await getTrajectoryDumps(db, job.id, 3)).length, 1);
        assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.values), [{ loss: 3.5 }]);
        // The same commit again (its answer was lost): every row once, every event once.
        await commitStep(db, store, writer, 3, everything(3));
        assert.equal((await listEvents(db, job.id)).filter((e) => e.type === "step").length, 1);
        assert.equal((await listCheckpoints(db, job.id)).length, 1);
      },
    );

    await t.step("a worker whose lease was reaped commits nothing of its step", async () => {
      const { job, writer } = await claim("w2");
      const before = await listEvents(db, job.id);
      await reapExpiredLeases(db, { now: new Date(Date.now() + 120_000) });
      await assert.rejects(commitStep(db, store, writer, 1, everything(1)), FenceLostError);
      assert.deepEqual(await stepRecord(db, job.id, 1), {
        metrics: false,
        checkpoint: false,
        skills: false,
        trajectories: [],
        events: [],
      });
      assert.deepEqual(
        (await listEvents(db, job.id)).map((e) => e.type),
        [...before.map((e) => e.type), "status"], // only the reaper's own status event
      );
    });

    await t.step("bad input is refused before anything is uploaded or written", async () => {
      const { job, writer } = await claim("w3");
      const bad = { ...everything(2), metrics: { loss: Number.NaN } };
      await assert.rejects(commitStep(db, store, writer, 2, bad), /finite number/);
      const wrongStep = { ...everything(2), trajectories: [{ ...everything(5).trajectories[0] }] };
      await assert.rejects(commitStep(db, store, writer, 2, wrongStep), /must be of that step/);
      assert.equal((await stepRecord(db, job.id, 2)).checkpoint, false);
      const objects = await store.list(`tenants/${tenantId}/jobs/${job.id}/`);
      assert.deepEqual(objects.filter((k) => k.includes("/step-2/")), []);
    });
  } finally {
    await s3.close();
    await close();
  }
});
