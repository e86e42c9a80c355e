/**
 * A job may start from, or warm up on, only its own tenant's artifacts: another tenant's job
 * (`model.base: job:<id>`) or objects in the service's bucket under another tenant's prefix are
 * a 422 at the field, and nothing is stored.
 */
import assert from "node:assert/strict";
import { req, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();
const bucket = fx.store.bucket;

async function submit(key: string, spec: Record<string, unknown>): Promise<Response> {
  return await req(fx.app, "POST", "/v1/jobs", { key, json: { env: { id: "sokoban" }, ...spec } });
}

async function jobCount(tenantId: string): Promise<number> {
  const [row] = await fx.db.query<{ n: number }>(
    "select count(*)::int as n from jobs where tenant_id = $1",
    [tenantId],
  );
  return Number(row.n);
}

Deno.test("model.base naming another tenant's job is a 422 at model.base; its own job is accepted", async () => {
  const theirs = await (await submit(fx.keyB, {})).json();
  const mine = await (await submit(fx.keyA, {})).json();
  const before = await jobCount(fx.tenantA.id);
  for (const base of [`job:${theirs.id}`, `job:${theirs.id}@3`, `job:${crypto.randomUUID()}`]) {
    const res = await submit(fx.keyA, { model: { base } });
    const body = await res.json();
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.errors[0].path, "model.base");
  }
  assert.equal(await jobCount(fx.tenantA.id), before);
  const ok = await submit(fx.keyA, { model: { base: `job:${mine.id}@0` } });
  assert.equal(ok.status, 201, await ok.text());
});

Deno.test("s3 URIs into another tenant's prefix of the service's bucket are a 422 at the field", async () => {
  const other = `s3://${bucket}/tenants/${fx.tenantB.id}/jobs/x/checkpoints/step-1/attempt-0/`;
  const cases: [Record<string, unknown>, string][] = [
    [{ model: { base: other } }, "model.base"],
    [{ model: { base: `s3://${bucket}/` } }, "model.base"],
    [{ warmup: { data: `s3://${bucket}/tenants/${fx.tenantB.id}/data.jsonl` } }, "warmup.data"],
  ];
  for (const [spec, path] of cases) {
    const res = await submit(fx.keyA, spec);
    const body = await res.json();
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.errors[0].path, path);
  }
  const own = `s3://${bucket}/tenants/${fx.tenantA.id}/models/m/`;
  assert.equal((await submit(fx.keyA, { model: { base: own } })).status, 201);
});

Deno.test("s3 URIs of another bucket are a 422 at the field, as the worker would refuse them", async () => {
  const before = await jobCount(fx.tenantA.id);
  const cases: [Record<string, unknown>, string][] = [
    [{ model: { base: "s3://other-bucket/models/m/" } }, "model.base"],
    [{ warmup: { data: "s3://other-bucket/data.jsonl" } }, "warmup.data"],
  ];
  for (const [spec, path] of cases) {
    const res = await submit(fx.keyA, spec);
    const body = await res.json();
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.errors[0].path, path);
    assert.equal(body.errors[0].code, "other_bucket");
    assert.match(body.detail, new RegExp(`${path}.*must name the service's bucket ${bucket}`));
  }
  assert.equal(await jobCount(fx.tenantA.id), before);
});

Deno.test({ name: "spec reference tests close their fixture", fn: async () => await fx.close() });
