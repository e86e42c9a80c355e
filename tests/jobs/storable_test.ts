/**
 * A worker's writes that carry U+0000 or an unpaired surrogate (an environment's observation, a
 * generated skill, an error quoting either) are stored with U+FFFD instead of failing in
 * Postgres, so the job can still report progress and be marked failed.
 */
import assert from "node:assert/strict";
import { claimJob, failJob, fenceOf, submitJob } from "../../jobs/queue.ts";
import { appendEvent, listEvents } from "../../jobs/events.ts";
import { recordMetrics, setProgress } from "../../jobs/metrics.ts";
import { storableJson, storableText } from "../../jobs/_storable.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";

const { db, close } = await openTestDatabase();
const tenantId = await createTenant(db);

async function runningJob() {
  const { job } = await submitJob(db, { tenantId, spec: { ...testSpec(), priority: 1000 } });
  const claimed = await claimJob(db, { workerId: `w-${job.id}`, device: "cpu", leaseMs: 60_000 });
  assert.equal(claimed?.id, job.id);
  return claimed!;
}

Deno.test("storableText replaces NUL and lone surrogates and keeps paired ones", () => {
  assert.equal(storableText("a\u0000b\ud800c\udc00\u{1f600}"), "a\ufffdb\ufffdc\ufffd\u{1f600}");
  assert.equal(storableText("plain"), "plain");
  assert.equal(storableJson({ "k\u0000": ["\ud83d"] }), '{"k\ufffd":["\ufffd"]}');
});

Deno.test("an event, progress and metrics carrying NUL or a lone surrogate are stored", async () => {
  const job = await runningJob();
  const fence = fenceOf(job);
  const event = await appendEvent(db, fence, "stage", { obs: "wall\u0000", skill: "x\ud800" });
  assert.deepEqual(event.data, { obs: "wall\ufffd", skill: "x\ufffd" });
  await setProgress(db, fence, { stage: "rollout\u0000" });
  await recordMetrics(db, fence, 0, { "odd\u0000name": 1 });
  const events = await listEvents(db, job.id);
  assert.ok(events.some((e) => e.type === "stage"));
});

Deno.test("a job fails with an error message that quotes a NUL character", async () => {
  const job = await runningJob();
  const failed = await failJob(db, fenceOf(job), "Cannot parse action \u0000 from the env");
  assert.equal(failed.status, "failed");
  assert.equal(failed.error, "Cannot parse action \ufffd from the env");
});

Deno.test({ name: "storable tests close their database", fn: async () => await close() });
