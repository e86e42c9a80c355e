/**
 * The trainer commits each step whole (one `commitStep`), and a resumed job re-commits what its
 * last committed step lacks: here the final step's skill library and `checkpoint` event, as a
 * worker killed between two single-artifact writes once left them (the job `succeeded` and
 * `GET …/skills?step=2` answered 404).
 */
import assert from "node:assert/strict";
import {
  getSkillLibrary,
  listEvents,
  readCheckpointFile,
  readSkillLibrary,
  stepRecord,
} from "../../../jobs/mod.ts";
import { getCheckpoint } from "../../../jobs/mod.ts";
import { openJobHarness, runOne, tinySpec } from "./_jobs.ts";

Deno.test("trainer steps are committed whole, and a resume repairs a step that is not", async () => {
  await using h = await openJobHarness();
  const { db, store } = h;
  const job = await h.submit(tinySpec());
  const error = () => h.error(job.id);
  assert.equal(
    await runOne(h.worker({})),
    "succeeded",
    await error(),
  );
  for (const step of [0, 1, 2]) {
    const r = await stepRecord(db, job.id, step);
    assert.deepEqual([r.metrics, r.checkpoint, r.skills], [true, true, true], `step ${step}`);
    assert.ok(r.events.includes("checkpoint") && r.events.includes("eval"), `step ${step}`);
    assert.ok(r.trajectories.includes("eval"), `step ${step}`);
    if (step > 0) assert.ok(r.events.includes("step") && r.trajectories.includes("rollout"));
  }
  const before = await readSkillLibrary(store, (await getSkillLibrary(db, job.id, 2))!);

  // What a worker killed between the final checkpoint's row and its skill library's row left.
  await db.query("delete from skill_libraries where job_id = $1 and step = 2", [job.id]);
  await db.query(
    "delete from job_events where job_id = $1 and type = 'checkpoint' and data->>'step' = '2'",
    [job.id],
  );
  await db.query(
    `update jobs set status = 'queued', attempt = 1, worker_id = null, finished_at = null
       where id = $1`,
    [job.id],
  );
  assert.equal(
    await runOne(h.worker({})),
    "succeeded",
    await error(),
  );
  const repaired = await getSkillLibrary(db, job.id, 2);
  assert.ok(repaired, "the resumed run re-committed the final skill library");
  assert.equal(repaired.attempt, 1);
  assert.deepEqual(await readSkillLibrary(store, repaired), before);
  const state = JSON.parse(new TextDecoder().decode(
    await readCheckpointFile(
      store,
      (await getCheckpoint(db, job.id, 2))!,
      "trainer_state.json",
    ),
  ));
  assert.deepEqual(await readSkillLibrary(store, repaired), state.skill_library);
  const events = await listEvents(db, job.id, { limit: 1000 });
  const checkpointsOf2 = events.filter((e) =>
    e.type === "checkpoint" && (e.data as { step: number }).step === 2
  );
  assert.equal(checkpointsOf2.length, 1);
  assert.equal(checkpointsOf2[0].attempt, 1);
  assert.ok(events.some((e) => e.type === "resumed"));
});
