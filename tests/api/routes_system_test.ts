import assert from "node:assert/strict";
import { ArtifactStore, createLogger, fenceOf } from "../../jobs/mod.ts";
import { createApp } from "../../api/app.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

Deno.test("healthz answers ok and readyz checks the database and the store", async () => {
  assert.deepEqual(await (await req(fx.app, "GET", "/healthz")).json(), { status: "ok" });
  assert.deepEqual(await (await req(fx.app, "GET", "/readyz")).json(), { status: "ready" });
  const unreachable = new ArtifactStore("http://127.0.0.1:9", {
    bucket: "nope",
    region: "us-east-1",
    credentials: { accessKeyId: "x", secretAccessKey: "y" },
  });
  const app = createApp({
    db: fx.db,
    store: unreachable,
    log: createLogger({}, { sink: () => {} }),
  });
  const res = await req(app, "GET", "/readyz");
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.match((await res.json()).detail, /object store/);
});

Deno.test("/metrics exposes jobs by state, queue wait and active workers as Prometheus text", async () => {
  await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: { env: { id: "sokoban" } } });
  const job = await runningJob(fx, fx.keyB);
  assert.ok(fenceOf(job).workerId);
  const app = createApp({ db: fx.db, store: fx.store, authCacheMs: 0, metricsToken: "op-key" });
  const res = await req(app, "GET", "/metrics", { headers: { authorization: "Bearer op-key" } });
  assert.match(res.headers.get("content-type")!, /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  assert.match(text, /^seed_jobs\{state="queued"\} 1$/m);
  assert.match(text, /^seed_jobs\{state="running"\} 1$/m);
  assert.match(text, /^seed_jobs\{state="failed"\} 0$/m);
  assert.match(text, /^seed_active_workers 1$/m);
  assert.match(text, /^seed_queue_oldest_wait_seconds \d+(\.\d+)?(e-?\d+)?$/m);
  assert.match(text, /^# TYPE seed_queue_wait_seconds_mean gauge$/m);
});

Deno.test("openapi.json documents every route with schemas generated from zod", async () => {
  const doc = await (await req(fx.app, "GET", "/openapi.json")).json();
  assert.equal(doc.openapi, "3.1.0");
  for (
    const path of [
      "/v1/jobs",
      "/v1/jobs/{id}",
      "/v1/jobs/{id}/cancel",
      "/v1/jobs/{id}/events",
      "/v1/jobs/{id}/metrics",
      "/v1/jobs/{id}/checkpoints",
      "/v1/jobs/{id}/checkpoints/{step}",
      "/v1/jobs/{id}/checkpoints/{step}/archive",
      "/v1/jobs/{id}/checkpoints/{step}/files/{name}",
      "/v1/jobs/{id}/skills",
      "/v1/jobs/{id}/skills/steps",
      "/v1/envs",
      "/v1/secrets",
      "/v1/secrets/{name}",
      "/healthz",
      "/readyz",
      "/metrics",
      "/openapi.json",
    ]
  ) assert.ok(doc.paths[path], path);
  const input = doc.components.schemas.JobSpecInput;
  assert.deepEqual(input.required, ["env"]);
  assert.equal(input.properties.rollout.properties.group_size.maximum, 64);
  assert.equal(doc.components.schemas.Job.properties.status.enum.length, 6);
  const listParams = doc.paths["/v1/jobs"].get.parameters.map((p: { name: string }) => p.name);
  assert.deepEqual(listParams, [
    "status",
    "name",
    "name_prefix",
    "id_prefix",
    "metadata",
    "limit",
    "cursor",
  ]);
  const metadata = doc.paths["/v1/jobs"].get.parameters.find((p: { name: string }) =>
    p.name === "metadata"
  );
  assert.equal(metadata.style, "deepObject");
  const submit = doc.components.schemas.JobSubmit;
  // name and metadata are nullable (OpenAI's clients send null): anyOf [the value, null].
  assert.equal(submit.properties.name.anyOf[0].maxLength, 128);
  assert.equal(submit.properties.metadata.anyOf[0].additionalProperties.maxLength, 512);
  assert.equal(submit.properties.rollout.properties.group_size.maximum, 64);
  assert.ok(doc.paths["/v1/jobs/{id}"].delete.responses["409"]);
});

Deno.test({
  name: "close the system route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
