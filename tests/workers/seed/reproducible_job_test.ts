import assert from "node:assert/strict";
import { getJob, getSkillLibrary, readSkillLibrary } from "../../../jobs/mod.ts";
import { createTenant, openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";
import {
  checkpointFile,
  metricsByStep,
  runOne,
  submit,
  testWorker,
  tinySpec,
  trainerRegistry,
  untimed,
} from "./_jobs.ts";

/** A skill library's skills without the job id that each entry's provenance names. */
function skillsOf(json: unknown): unknown {
  return JSON.parse(JSON.stringify(json, (k, v) => (k === "job_id" ? undefined : v)));
}

Deno.test("two runs of one spec on 2 engine threads give identical metrics, weights and skills", async () => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  try {
    // The default engine (2 intra-op threads), with batches large enough that onnxruntime
    // splits the gradient kernels over both threads.
    const spec = tinySpec({
      warmup: {
        policy: { episodes: 8, epochs: 1, batch_size: 32 },
        analyzer: { episodes: 4, epochs: 1, batch_size: 16 },
      },
    });
    const worker = testWorker(db, s3.store, trainerRegistry());
    const jobs = [await submit(db, tenantId, spec), await submit(db, tenantId, spec)];
    for (const job of jobs) {
      assert.equal(
        await runOne(worker),
        "succeeded",
        (await getJob(db, { tenantId, jobId: job.id }))?.error ?? "",
      );
    }
    const [a, b] = jobs.map((j) => j.id);
    const [ma, mb] = [await metricsByStep(db, a), await metricsByStep(db, b)];
    assert.deepEqual([...ma.keys()], [0, 1, 2]);
    for (const step of ma.keys()) {
      assert.deepEqual(untimed(mb.get(step)!), untimed(ma.get(step)!), `metrics of step ${step}`);
    }
    assert.notDeepEqual(
      await checkpointFile(db, s3.store, a, 2, "model.safetensors"),
      await checkpointFile(db, s3.store, a, 0, "model.safetensors"),
      "the updates changed the weights",
    );
    for (const step of [0, 2]) {
      for (const name of ["model.safetensors", ...(step ? ["optimizer.safetensors"] : [])]) {
        assert.deepEqual(
          await checkpointFile(db, s3.store, b, step, name),
          await checkpointFile(db, s3.store, a, step, name),
          `${name} at step ${step}`,
        );
      }
    }
    const [la, lb] = [await getSkillLibrary(db, a), await getSkillLibrary(db, b)];
    assert.deepEqual(
      skillsOf(await readSkillLibrary(s3.store, lb!)),
      skillsOf(await readSkillLibrary(s3.store, la!)),
    );
  } finally {
    await s3.close();
    await close();
  }
});
