import assert from "node:assert/strict";
import { CreateMultipartUploadCommand, UploadPartCommand } from "@aws-sdk/client-s3";
import { saveCheckpoint } from "../../jobs/artifacts.ts";
import { claimJob, fenceOf, submitJob, succeedJob } from "../../jobs/queue.ts";
import { openStore } from "../../jobs/store.ts";
import { startSweeper, sweeperMetricsText, sweepOrphans } from "../../jobs/sweeper.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";
import { startTestStore } from "../_harness/s3.ts";

const text = (s: string) => new TextEncoder().encode(s);

Deno.test("the sweeper removes objects no row owns and incomplete multipart uploads, and nothing else", async () => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  // The same server and bucket, knowing the server's folder (as openStore sets for the embedded
  // one).
  const store = await openStore({
    endpoint: s3.env.S3_ENDPOINT,
    bucket: s3.env.S3_BUCKET,
    accessKeyId: s3.env.S3_ACCESS_KEY_ID,
    secretAccessKey: s3.env.S3_SECRET_ACCESS_KEY,
    localDirectory: s3.directory,
  });
  try {
    const tenantId = await createTenant(db);
    await submitJob(db, { tenantId, spec: testSpec() });
    const job = (await claimJob(db, { workerId: "w1", device: "cpu", leaseMs: 60_000 }))!;
    const saved = await saveCheckpoint(db, store, { fence: fenceOf(job), tenantId }, {
      step: 1,
      files: [{ name: "state.json", bytes: text('{"a":1}') }],
    });
    const jobs = `tenants/${tenantId}/jobs/${job.id}/`;
    const orphans = [
      `${jobs}checkpoints/step-2/attempt-0/state.json`, // a step whose row never committed
      `tenants/${tenantId}/models/${crypto.randomUUID()}/config.json`, // a failed upload
      // a deleted job
      `tenants/${tenantId}/jobs/${crypto.randomUUID()}/skills/step-1/attempt-0.json`,
      `tenants/${tenantId}/jobs/not-a-uuid/x.json`,
    ];
    for (const key of orphans) await store.put(key, text("{}"));
    await store.put("inputs/warmup.jsonl", text("{}\n")); // an operator's object: never touched
    // A multipart upload cut off after its first part (s3rver can neither list nor abort it).
    const { UploadId } = await store.send<{ UploadId: string }>(
      new CreateMultipartUploadCommand({ Bucket: store.bucket, Key: `${jobs}big.bin` }),
    );
    await store.send(
      new UploadPartCommand({
        Bucket: store.bucket,
        Key: `${jobs}big.bin`,
        UploadId,
        PartNumber: 1,
        Body: new Uint8Array(5 * 1024 * 1024),
      }),
    );
    const uploads = `${s3.directory}/${store.bucket}/._S3rver_uploads`;
    assert.equal([...Deno.readDirSync(uploads)].length, 1);
    const all = async () => (await store.list("")).sort();

    const young = await sweepOrphans(db, store); // default grace: every object is young
    assert.deepEqual({ ...young, multipartListing: undefined }, {
      objects: 0,
      bytes: 0,
      multipartUploads: 0,
      multipartListing: undefined,
      deletesFinished: 0,
    });
    assert.equal((await all()).length, 6);

    const sweeper = startSweeper(db, store, {
      intervalMs: 3_600_000,
      graceMs: 0,
      now: () => Date.now() + 5_000,
    });
    const swept = await sweeper.runOnce();
    await sweeper.stop();
    assert.deepEqual(swept, {
      objects: 4,
      bytes: 8,
      multipartUploads: 1,
      multipartListing: false,
      deletesFinished: 0,
    });
    assert.deepEqual(await all(), [saved.files[0].key, "inputs/warmup.jsonl"].sort());
    assert.deepEqual([...Deno.readDirSync(uploads)], []);
    const metrics = sweeperMetricsText(sweeper.totals);
    assert.match(metrics, /^seed_orphan_objects_deleted_total 4$/m);
    assert.match(metrics, /^seed_orphan_multipart_aborted_total 1$/m);
    assert.match(metrics, /^seed_orphan_multipart_listing 0$/m);
    assert.match(metrics, /^seed_orphan_sweeps_total\{outcome="ok"\} 1$/m);
  } finally {
    await store.close();
    await s3.close();
    await close();
  }
});

Deno.test("a running job's rollout-policy folders are kept by the sweeper; a finished job's are removed", async () => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  try {
    const tenantId = await createTenant(db);
    await submitJob(db, { tenantId, spec: testSpec() });
    await submitJob(db, { tenantId, spec: testSpec() });
    const running = (await claimJob(db, { workerId: "w1", device: "cpu", leaseMs: 60_000 }))!;
    const done = (await claimJob(db, { workerId: "w2", device: "cpu", leaseMs: 60_000 }))!;
    await succeedJob(db, fenceOf(done));
    const policy = (id: string) =>
      `tenants/${tenantId}/jobs/${id}/rollout-policy/v3/attempt-1/model.safetensors`;
    for (const id of [running.id, done.id]) await s3.store.put(policy(id), text("w"));
    const swept = await sweepOrphans(db, s3.store, { graceMs: 0, now: () => Date.now() + 5_000 });
    assert.equal(swept.objects, 1);
    assert.deepEqual(await s3.store.list("tenants/"), [policy(running.id)]);
  } finally {
    await s3.close();
    await close();
  }
});
