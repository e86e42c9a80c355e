import assert from "node:assert/strict";
import { claimJob, fenceOf, submitJob, succeedJob } from "../../jobs/queue.ts";
import { FenceLostError } from "../../jobs/errors.ts";
import { appendEvent, InvalidEventError, listEvents } from "../../jobs/events.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";

const { db, close } = await openTestDatabase();
const tenantId = await createTenant(db);

/** A freshly claimed job (its own, so events of other tests do not mix in). */
async function runningJob() {
  const { job } = await submitJob(db, { tenantId, spec: testSpec() });
  await db.query(
    "update jobs set status = 'cancelled', finished_at = now() where status = 'queued' and id <> $1",
    [job.id],
  );
  const claimed = await claimJob(db, { workerId: `w-${job.id}`, device: "cpu", leaseMs: 60_000 });
  assert.equal(claimed?.id, job.id);
  return claimed!;
}

const stageEvents = async (jobId: string) =>
  (await listEvents(db, jobId)).filter((e) => e.type === "stage");

Deno.test("a keyed append retried after its first try was stored is stored once", async () => {
  const job = await runningJob();
  const first = await appendEvent(db, fenceOf(job), "stage", { stage: "rollout" }, { key: "k1" });
  const retry = await appendEvent(db, fenceOf(job), "stage", { stage: "rollout" }, { key: "k1" });
  assert.deepEqual(retry, first);
  assert.equal(first.key, "k1");
  assert.equal((await stageEvents(job.id)).length, 1);
});

Deno.test("appends with different keys, or without a key, are each stored", async () => {
  const job = await runningJob();
  await appendEvent(db, fenceOf(job), "stage", { stage: "a" }, { key: "k1" });
  await appendEvent(db, fenceOf(job), "stage", { stage: "b" }, { key: "k2" });
  await appendEvent(db, fenceOf(job), "stage", { stage: "c" });
  await appendEvent(db, fenceOf(job), "stage", { stage: "c" });
  assert.deepEqual((await stageEvents(job.id)).map((e) => e.data), [
    { stage: "a" },
    { stage: "b" },
    { stage: "c" },
    { stage: "c" },
  ]);
});

Deno.test("the same key on two jobs names two events", async () => {
  const a = await runningJob();
  const b = await runningJob();
  await appendEvent(db, fenceOf(a), "stage", { stage: "x" }, { key: "same" });
  await appendEvent(db, fenceOf(b), "stage", { stage: "x" }, { key: "same" });
  assert.equal((await stageEvents(a.id)).length, 1);
  assert.equal((await stageEvents(b.id)).length, 1);
});

Deno.test("a keyed retry after the fence was lost returns the stored event; a new key is refused", async () => {
  const job = await runningJob();
  const fence = fenceOf(job);
  const stored = await appendEvent(db, fence, "stage", { stage: "eval" }, { key: "before" });
  await succeedJob(db, fence);
  assert.deepEqual(
    await appendEvent(db, fence, "stage", { stage: "eval" }, { key: "before" }),
    stored,
  );
  await assert.rejects(
    appendEvent(db, fence, "stage", { stage: "eval" }, { key: "after" }),
    FenceLostError,
  );
});

Deno.test("an empty or over-long key is refused before anything is written", async () => {
  const job = await runningJob();
  for (const key of ["", "k".repeat(129)]) {
    await assert.rejects(appendEvent(db, fenceOf(job), "stage", {}, { key }), InvalidEventError);
  }
  assert.equal((await stageEvents(job.id)).length, 0);
});

Deno.test({
  name: "close the events database",
  fn: () => close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
