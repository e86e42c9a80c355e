import assert from "node:assert/strict";
import { appendEvent, fenceOf, recordMetrics, succeedJob } from "../../jobs/mod.ts";
import { createApp } from "../../api/app.ts";
import { SeedClient } from "../../api/client/client.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture({ sse: { pollMs: 20 } });

async function allEventIds(jobId: string): Promise<number[]> {
  const rows = await fx.db.query<{ id: string }>(
    "select id from job_events where job_id = $1 order by id",
    [jobId],
  );
  return rows.map((r) => Number(r.id));
}

Deno.test("event pages follow the after cursor and return each event once", async () => {
  const job = await runningJob(fx, fx.keyA);
  for (let i = 0; i < 5; i++) await appendEvent(fx.db, fenceOf(job), "stage", { i });
  const seen: number[] = [];
  let after = 0;
  for (;;) {
    const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/events?limit=2&after=${after}`, {
      key: fx.keyA,
    });
    assert.equal(res.status, 200);
    const page = await res.json();
    assert.equal(page.terminal, false);
    if (page.events.length === 0) break;
    seen.push(...page.events.map((e: { id: number }) => e.id));
    after = page.next_after;
  }
  assert.deepEqual(seen, await allEventIds(job.id));
  const bad = await req(fx.app, "GET", `/v1/jobs/${job.id}/events?after=-1`, { key: fx.keyA });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).errors[0].path, "after");
});

/** Cuts an SSE body after `n` complete messages by erroring it (a dropped connection). */
function cutAfter(n: number): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  let text = "";
  return new TransformStream({
    transform(chunk, controller) {
      controller.enqueue(chunk);
      text += new TextDecoder().decode(chunk);
      seen = text.split("\n\n").length - 1;
      if (seen >= n) controller.error(new Error("connection dropped by the test"));
    },
  });
}

Deno.test("an SSE client that reconnects with Last-Event-ID receives every event exactly once", async () => {
  const job = await runningJob(fx, fx.keyA);
  for (let i = 0; i < 3; i++) await appendEvent(fx.db, fenceOf(job), "stage", { i });
  const app = createApp({ db: fx.db, store: fx.store, sse: { pollMs: 20 }, authCacheMs: 0 });
  let streams = 0;
  const lastEventIds: (string | null)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    const res = await app.fetch(r);
    if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) return res;
    lastEventIds.push(r.headers.get("last-event-id"));
    // The first two streams drop after the retry line + 2 events; later ones run to the end.
    if (++streams > 2) return res;
    return new Response(res.body!.pipeThrough(cutAfter(3)), res);
  });
  try {
    const client = new SeedClient({
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
      apiKey: fx.keyA,
    });
    const received: number[] = [];
    let more = true;
    for await (const msg of client.follow(job.id)) {
      received.push(Number(msg.id));
      assert.equal(JSON.parse(msg.data).id, Number(msg.id));
      if (more && received.length >= 4) {
        more = false;
        for (let i = 3; i < 6; i++) await appendEvent(fx.db, fenceOf(job), "stage", { i });
        await succeedJob(fx.db, fenceOf(job));
      }
    }
    const all = await allEventIds(job.id);
    assert.deepEqual(received, all);
    assert.ok(streams >= 3, `the client reconnected (${streams} streams)`);
    assert.equal(lastEventIds[0], null);
    assert.equal(lastEventIds[1], String(all[1]));
    assert.equal(lastEventIds[2], String(all[3]));
  } finally {
    await server.shutdown();
  }
});

Deno.test("the SSE stream of a finished job replays from Last-Event-ID and then ends", async () => {
  const job = await runningJob(fx, fx.keyA);
  await appendEvent(fx.db, fenceOf(job), "stage", { x: 1 });
  await succeedJob(fx.db, fenceOf(job));
  const all = await allEventIds(job.id);
  const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/events`, {
    key: fx.keyA,
    headers: { accept: "text/event-stream", "last-event-id": String(all[0]) },
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type")!, /^text\/event-stream/);
  const text = await res.text();
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(ids, all.slice(1));
  assert.match(text, /event: end\n/);
});

Deno.test("a live SSE stream wakes on NOTIFY instead of waiting for its poll", async () => {
  const job = await runningJob(fx, fx.keyA);
  const app = createApp({ db: fx.db, store: fx.store, sse: { pollMs: 600_000 }, authCacheMs: 0 });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
  try {
    const client = new SeedClient({
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
      apiKey: fx.keyA,
    });
    // With a 10-minute poll, only NOTIFY can deliver the events below before the 20 s bound.
    const signal = AbortSignal.timeout(20_000);
    const types: string[] = [];
    for await (const msg of client.follow(job.id, { signal, maxRetries: 0 })) {
      types.push(msg.event);
      if (types.length === 2) await appendEvent(fx.db, fenceOf(job), "stage", { stage: "eval" });
      if (types.length === 3) await succeedJob(fx.db, fenceOf(job));
    }
    assert.equal(signal.aborted, false);
    assert.deepEqual(types, ["status", "status", "stage", "status"]);
  } finally {
    await server.shutdown();
  }
});

Deno.test("metrics come as a JSON series and as CSV by query or Accept header", async () => {
  const job = await runningJob(fx, fx.keyA);
  await recordMetrics(fx.db, fenceOf(job), 0, { success_rate: 0, mean_reward: -1.5 });
  await recordMetrics(fx.db, fenceOf(job), 1, { success_rate: 0.25, mean_reward: 2, kl: 0.01 });
  const json = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/metrics`, { key: fx.keyA }))
    .json();
  assert.deepEqual(json.names, ["kl", "mean_reward", "success_rate"]);
  assert.deepEqual(json.points.map((p: { step: number }) => p.step), [0, 1]);
  assert.equal(json.points[1].values.success_rate, 0.25);
  for (
    const [path, headers] of [
      [`/v1/jobs/${job.id}/metrics?format=csv`, {}],
      [`/v1/jobs/${job.id}/metrics`, { accept: "text/csv" }],
    ] as const
  ) {
    const res = await req(fx.app, "GET", path, { key: fx.keyA, headers });
    assert.match(res.headers.get("content-type")!, /^text\/csv/);
    const lines = (await res.text()).trimEnd().split("\r\n");
    assert.equal(lines[0], "step,attempt,created_at,kl,mean_reward,success_rate");
    assert.match(lines[1], /^0,0,[^,]+,,-1\.5,0$/);
    assert.match(lines[2], /^1,0,[^,]+,0\.01,2,0\.25$/);
  }
  const from = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/metrics?from_step=1`, {
    key: fx.keyA,
  })).json();
  assert.equal(from.points.length, 1);
  const bad = await req(fx.app, "GET", `/v1/jobs/${job.id}/metrics?format=xml`, { key: fx.keyA });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).errors[0].path, "format");
});

Deno.test({
  name: "close the events route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
