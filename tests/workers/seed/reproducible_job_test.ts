import assert from "node:assert/strict";
import { getSkillLibrary, readSkillLibrary } from "../../../jobs/mod.ts";
import { metricsByStep, openJobHarness, runOne, tinySpec, untimed } from "./_jobs.ts";

/** A skill library's skills without the job id that each entry's provenance names. */
function skillsOf(json: unknown): unknown {
  return JSON.parse(JSON.stringify(json, (k, v) => (k === "job_id" ? undefined : v)));
}

Deno.test("two runs of one spec on 2 engine threads give identical metrics, weights and skills", async () => {
  await using h = await openJobHarness();
  const { db, store } = h;
  // The default engine (2 intra-op threads), with batches large enough that onnxruntime
  // splits the gradient kernels over both threads.
  const spec = tinySpec({
    warmup: {
      policy: { episodes: 8, epochs: 1, batch_size: 32 },
      analyzer: { episodes: 4, epochs: 1, batch_size: 16 },
    },
  });
  const worker = h.worker({});
  const jobs = [await h.submit(spec), await h.submit(spec)];
  for (const job of jobs) {
    assert.equal(
      await runOne(worker),
      "succeeded",
      await h.error(job.id),
    );
  }
  const [a, b] = jobs.map((j) => j.id);
  const [ma, mb] = [await metricsByStep(db, a), await metricsByStep(db, b)];
  assert.deepEqual([...ma.keys()], [0, 1, 2]);
  for (const step of ma.keys()) {
    assert.deepEqual(untimed(mb.get(step)!), untimed(ma.get(step)!), `metrics of step ${step}`);
  }
  assert.notDeepEqual(
    await h.file(a, 2, "model.safetensors"),
    await h.file(a, 0, "model.safetensors"),
    "the updates changed the weights",
  );
  for (const step of [0, 2]) {
    for (const name of ["model.safetensors", ...(step ? ["optimizer.safetensors"] : [])]) {
      assert.deepEqual(
        await h.file(b, step, name),
        await h.file(a, step, name),
        `${name} at step ${step}`,
      );
    }
  }
  const [la, lb] = [await getSkillLibrary(db, a), await getSkillLibrary(db, b)];
  assert.deepEqual(
    skillsOf(await readSkillLibrary(store, lb!)),
    skillsOf(await readSkillLibrary(store, la!)),
  );
});
