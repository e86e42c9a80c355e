/**
 * Hostile input that used to reach zod or Postgres unchecked and answer 500: deeply nested JSON,
 * strings Postgres cannot store (U+0000, lone surrogates), tampered cursors, int4-overflowing
 * steps. Each must be a 400 with a field path, and must store nothing.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { req, startApiFixture } from "./_fixture.ts";
import { jsonLimitIssue, MAX_JSON_DEPTH } from "../../api/json_limits.ts";

// An empty env list accepts any env.options, as the stock api/main.ts may serve.
const fx = await startApiFixture({ envs: () => [] });

async function jobCount(): Promise<number> {
  const [row] = await fx.db.query<{ n: number }>(
    "select count(*)::int as n from jobs where tenant_id = $1",
    [fx.tenantA.id],
  );
  return Number(row.n);
}

async function badRequest(res: Response): Promise<{ detail: string; errors: { path: string }[] }> {
  const text = await res.text();
  assert.equal(res.status, 400, text);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  return JSON.parse(text);
}

function cursorOf(key: unknown): string {
  return Buffer.from(JSON.stringify(key), "utf8").toString("base64url");
}

Deno.test("POST /v1/jobs answers 400 at the field for JSON nested thousands deep and stores nothing", async () => {
  const before = await jobCount();
  const body = `{"env":{"id":"sokoban","options":{"a":${"[".repeat(5000)}${"]".repeat(5000)}}}}`;
  const problem = await badRequest(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body }));
  assert.equal(problem.errors[0].path, `env.options.a${"[0]".repeat(MAX_JSON_DEPTH - 3)}`);
  assert.equal(await jobCount(), before);
});

Deno.test("POST /v1/jobs answers 400 for U+0000 in a string or key and stores nothing", async () => {
  const before = await jobCount();
  const cases: [unknown, string][] = [
    [{ env: { id: "sokoban" }, warmup: { data: "s3://bucket/a\u0000b" } }, "warmup.data"],
    [{ env: { id: "sokoban" }, model: { base: "s3://bucket/a\u0000/" } }, "model.base"],
    [{ env: { id: "sokoban", options: { a: ["x\u0000"] } } }, "env.options.a[0]"],
    [{ env: { id: "sokoban", options: { "k\u0000": 1 } } }, "env.options.k\ufffd"],
  ];
  for (const [json, path] of cases) {
    const problem = await badRequest(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json }));
    assert.equal(problem.errors[0].path, path);
  }
  assert.equal(await jobCount(), before);
});

Deno.test("POST /v1/jobs answers 400 for an unpaired surrogate escape and accepts a paired one", async () => {
  const before = await jobCount();
  const lone = '{"env":{"id":"sokoban","options":{"a":"\\ud800x"}}}';
  const problem = await badRequest(
    await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: lone }),
  );
  assert.equal(problem.errors[0].path, "env.options.a");
  assert.equal(await jobCount(), before);
  const paired = '{"env":{"id":"sokoban","options":{"a":"\\ud83d\\ude00 ok"}}}';
  const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: paired });
  assert.equal(res.status, 201, await res.clone().text());
  assert.equal((await res.json()).spec.env.options.a, "\u{1f600} ok");
});

Deno.test("jsonLimitIssue accepts nesting up to the limit and walks without recursion", () => {
  let ok: unknown = 1;
  for (let i = 0; i < MAX_JSON_DEPTH; i++) ok = [ok];
  assert.equal(jsonLimitIssue(ok), undefined);
  assert.equal(jsonLimitIssue([ok])?.code, "too_deep");
  let deep: unknown = 1;
  for (let i = 0; i < 200_000; i++) deep = { k: deep };
  assert.equal(jsonLimitIssue(deep)?.code, "too_deep");
});

Deno.test("GET /v1/jobs answers 400 at `cursor` for a cursor whose time or id Postgres cannot cast", async () => {
  const id = crypto.randomUUID();
  const tampered = [
    { t: "garbage", id },
    { t: "2026-01-01T00:00:00.000000Z", id: "x" },
    { t: "2026\u0000", id },
    { t: "2026-02-30T00:00:00.000000Z", id },
    { t: "2026-01-01T24:00:00Z", id },
  ];
  for (const key of tampered) {
    const res = await req(fx.app, "GET", `/v1/jobs?cursor=${cursorOf(key)}`, { key: fx.keyA });
    const problem = await badRequest(res);
    assert.equal(problem.errors[0].path, "cursor", JSON.stringify(key));
  }
  const fine = cursorOf({ t: "2026-01-01T00:00:00.123456Z", id });
  const res = await req(fx.app, "GET", `/v1/jobs?cursor=${fine}`, { key: fx.keyA });
  assert.equal(res.status, 200, await res.text());
});

Deno.test("GET /v1/jobs/{id}/metrics answers 400 for a step past the int4 column's range", async () => {
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "sokoban" } },
  });
  const job = await res.json();
  for (const q of ["from_step=2147483648", "to_step=99999999999999"]) {
    const problem = await badRequest(
      await req(fx.app, "GET", `/v1/jobs/${job.id}/metrics?${q}`, { key: fx.keyA }),
    );
    assert.equal(problem.errors[0].path, q.split("=")[0]);
  }
});

Deno.test("a repeated query parameter is a 400 at that key, not a silent pick of one value", async () => {
  for (const q of ["limit=1&limit=500", "status=queued&status=running&limit=5"]) {
    const problem = await badRequest(await req(fx.app, "GET", `/v1/jobs?${q}`, { key: fx.keyA }));
    assert.equal(problem.errors[0].path, q.split("=")[0]);
  }
  const res = await req(fx.app, "GET", "/v1/jobs?status=queued,running&limit=5", { key: fx.keyA });
  assert.equal(res.status, 200, await res.text());
});

Deno.test({
  name: "hostile input tests close their fixture",
  fn: async () => await fx.close(),
});
