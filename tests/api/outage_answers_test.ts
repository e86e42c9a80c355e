/**
 * Answers during outages and to strangers: a checkpoint archive while the object store (its own
 * s3rver) is down answers 503 + Retry-After before any byte; an event stream's internal error
 * reaches the client as a generic message and an id, the detail only in the server log;
 * `GET /metrics` is the operator's (404 without a configured key, 401 without the key).
 */
import assert from "node:assert/strict";
import { createApp } from "../../api/app.ts";
import { sseStream } from "../../api/sse.ts";
import { snapshotStream } from "../../api/snapshot_stream.ts";
import {
  createLogger,
  fenceOf,
  type Logger,
  openStore,
  saveCheckpoint,
  startLocalS3,
} from "../../jobs/mod.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const s3Dir = await Deno.makeTempDir({ prefix: "seed-s3-" });
const s3 = await startLocalS3({ directory: s3Dir });
const store = await openStore({
  endpoint: s3.endpoint,
  bucket: "outage-answers",
  accessKeyId: "S3RVER",
  secretAccessKey: "S3RVER",
});
// The 503 below is logged as a warning: kept out of the test's output.
const fx = await startApiFixture({ store, log: createLogger({}, { sink: () => {} }) });

Deno.test("a checkpoint archive while the object store is down answers 503 with Retry-After", async () => {
  const job = await runningJob(fx, fx.keyA);
  await saveCheckpoint(fx.db, store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
    step: 1,
    files: [{ name: "config.json", bytes: new TextEncoder().encode("{}") }],
  });
  const path = `/v1/jobs/${job.id}/checkpoints/1/archive`;
  const up = await req(fx.app, "GET", path, { key: fx.keyA });
  assert.equal(up.status, 200);
  await up.body?.cancel();
  await s3.stop();
  const res = await req(fx.app, "GET", path, { key: fx.keyA });
  assert.equal(res.status, 503, await res.clone().text());
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.ok(Number(res.headers.get("retry-after")) > 0);
  await res.body?.cancel();
});

/** Reads an SSE stream to its end as text. */
const readAll = (body: ReadableStream<Uint8Array>) => new Response(body).text();
const FAILED_QUERY = "Failed query: select * from job_events where job_id = $1\nparams: 0b5e…";

for (
  const [name, stream] of [
    ["job events", (log: Logger) =>
      sseStream(
        {
          page: () => Promise.reject(new Error(FAILED_QUERY)),
          isTerminal: () => Promise.resolve(false),
        },
        0,
        { log },
      )],
    [
      "job list snapshots",
      (log: Logger) =>
        snapshotStream({ read: () => Promise.reject(new Error(FAILED_QUERY)) }, { log }),
    ],
  ] as const
) {
  Deno.test(`a ${name} stream's internal error sends an id, and the log has the detail`, async () => {
    const records: Record<string, unknown>[] = [];
    const text = await readAll(
      stream(createLogger({ service: "api" }, { sink: (l) => records.push(JSON.parse(l)) })),
    );
    assert.doesNotMatch(text, /select|params|job_events/);
    const data = JSON.parse(text.match(/event: error\ndata: (.*)\n/)![1]);
    assert.match(data.detail, /internal error; reconnect/);
    assert.match(data.error_id, /^[0-9a-f-]{36}$/);
    assert.equal(records.length, 1);
    assert.equal(records[0].level, "error");
    assert.equal(records[0].msg, "event stream failed");
    assert.equal(records[0].error_id, data.error_id);
    assert.match(String(records[0].error), /Failed query: select \* from job_events/);
  });
}

Deno.test("/metrics answers 404 when no operator key is configured", async () => {
  const res = await req(fx.app, "GET", "/metrics", { key: fx.keyA });
  assert.equal(res.status, 404);
  assert.doesNotMatch(await res.text(), /seed_jobs/);
});

Deno.test("/metrics answers 401 without the operator key and 200 with it", async () => {
  const app = createApp({ db: fx.db, store, authCacheMs: 0, metricsToken: "operator-secret" });
  const attempts: Record<string, string>[] = [{}, { authorization: "Bearer wrong-secret!" }];
  for (const headers of attempts) {
    const res = await req(app, "GET", "/metrics", { headers });
    assert.equal(res.status, 401);
    assert.doesNotMatch(await res.text(), /seed_jobs/);
  }
  // A tenant's API key is not the operator key.
  assert.equal((await req(app, "GET", "/metrics", { key: fx.keyA })).status, 401);
  const ok = await req(app, "GET", "/metrics", {
    headers: { authorization: "Bearer operator-secret" },
  });
  assert.equal(ok.status, 200);
  assert.match(await ok.text(), /^seed_jobs\{state="queued"\} \d+$/m);
});

Deno.test("close the fixture", async () => {
  await fx.close();
  await store.close();
  await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
});
