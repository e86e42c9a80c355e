import assert from "node:assert/strict";
import { createApp } from "../../api/app.ts";
import { ENV_CATALOG } from "../../jobs/mod.ts";
import { req, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

async function jobCount(): Promise<number> {
  return Number((await fx.db.query("select count(*)::int as n from jobs"))[0].n);
}

/** POSTs `spec`, expects a 422 and that no job row was added; returns the problem body. */
async function refused(spec: unknown) {
  const before = await jobCount();
  const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
  assert.equal(res.status, 422, await res.clone().text());
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.equal(await jobCount(), before);
  return await res.json();
}

Deno.test("GET /v1/envs serves the built-in catalog by default", async () => {
  const res = await req(fx.app, "GET", "/v1/envs", { key: fx.keyA });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body, ENV_CATALOG);
  assert.deepEqual(body.envs.map((e: { id: string }) => e.id), [
    "sokoban",
    "household",
    "webshop",
    "ezpoints",
    "search",
  ]);
  const sokoban = body.envs[0];
  const properties = sokoban.options_schema.properties as Record<string, { maximum?: number }>;
  assert.equal(properties.size.maximum, 10);
  assert.deepEqual(sokoban.splits.map((s: { name: string }) => s.name), [
    "train",
    "test_seen",
    "test_unseen",
  ]);
});

Deno.test("an unknown env.id is a 422 at env.id listing the known ids", async () => {
  const body = await refused({ env: { id: "chess" } });
  assert.equal(body.errors.length, 1);
  assert.equal(body.errors[0].path, "env.id");
  assert.equal(body.errors[0].code, "unknown_env");
  assert.match(body.errors[0].message, /sokoban, household, webshop/);
  // Quoted as every other "current value is", with the ids it could have been.
  assert.equal(
    body.detail,
    "Cannot queue the job as env.id must name a known environment (sokoban, household, " +
      'webshop, ezpoints, search): current value is "chess"',
  );
});

Deno.test("env.options out of the env's bounds is a 422 with the option's field path", async () => {
  const body = await refused({ env: { id: "sokoban", options: { size: 11, boxes: 1.5 } } });
  assert.deepEqual(body.errors.map((e: { path: string }) => e.path), [
    "env.options.size",
    "env.options.boxes",
  ]);
  assert.match(body.detail, /env\.options\.size/);
});

Deno.test("an option the env does not take is a 422 naming it", async () => {
  const body = await refused({ env: { id: "webshop", options: { size: 6 } } });
  assert.equal(body.errors[0].path, "env.options");
  assert.equal(body.errors[0].code, "unrecognized_keys");
  assert.match(body.errors[0].message, /size/);
});

Deno.test("an array option's bad item is a 422 at its index", async () => {
  const body = await refused({ env: { id: "household", options: { families: ["juggling"] } } });
  assert.equal(body.errors[0].path, "env.options.families[0]");
  assert.match(body.errors[0].message, /pick_and_place/);
});

Deno.test("valid options of each built-in env are accepted", async () => {
  for (
    const env of [
      { id: "sokoban", options: { size: 8, boxes: 2, end_on_deadlock: false } },
      { id: "household", options: { families: ["heat_then_place"] }, max_turns: 30 },
      { id: "webshop" },
    ]
  ) {
    const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: { env } });
    assert.equal(res.status, 201, await res.clone().text());
    assert.deepEqual((await res.json()).spec.env.options, env.options ?? {});
  }
});

Deno.test("an app given an empty env list checks no env ids or options", async () => {
  const app = createApp({ db: fx.db, store: fx.store, authCacheMs: 0, envs: () => [] });
  const res = await req(app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "chess", options: { anything: 1 } } },
  });
  assert.equal(res.status, 201);
  assert.deepEqual(await (await req(app, "GET", "/v1/envs", { key: fx.keyA })).json(), {
    envs: [],
  });
});

Deno.test("seed.skill_source reference is a 422 on an env that lists no reference analyzer", async () => {
  const app = createApp({
    db: fx.db,
    store: fx.store,
    authCacheMs: 0,
    envs: () => [
      { id: "custom", splits: [] },
      { id: "graded", splits: [], reference_analyzer: true },
    ],
  });
  const post = (json: unknown) => req(app, "POST", "/v1/jobs", { key: fx.keyA, json });
  const before = await jobCount();
  const res = await post({ env: { id: "custom" }, seed: { skill_source: "reference" } });
  assert.equal(res.status, 422, await res.clone().text());
  const body = await res.json();
  assert.equal(body.errors[0].path, "seed.skill_source");
  assert.equal(body.errors[0].code, "no_reference_analyzer");
  assert.match(body.detail, /seed\.skill_source/);
  assert.equal(await jobCount(), before);
  // The same env with the policy's skills, and an env that lists one, are queued.
  assert.equal((await post({ env: { id: "custom" } })).status, 201);
  const graded = await post({ env: { id: "graded" }, seed: { skill_source: "reference" } });
  assert.equal(graded.status, 201, await graded.clone().text());
});

Deno.test("every built-in env lists a reference analyzer and takes oracle skills", async () => {
  assert.ok(ENV_CATALOG.envs.every((e) => e.reference_analyzer === true));
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "household" }, seed: { skill_source: "reference" } },
  });
  assert.equal(res.status, 201, await res.clone().text());
  assert.equal((await res.json()).spec.seed.skill_source, "reference");
});

Deno.test("a stored job spec carries its arm's advantage defaults, a user's field kept", async () => {
  const post = async (json: unknown) => {
    const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()).spec.advantage;
  };
  const gigpo = await post({ method: "gigpo", env: { id: "sokoban" } });
  assert.deepEqual([gigpo.estimator, gigpo.norm, gigpo.invalid_action_penalty], [
    "gigpo",
    "mean",
    0.1,
  ]);
  const seed = await post({ env: { id: "webshop" }, advantage: { invalid_action_penalty: 1 } });
  assert.deepEqual([seed.estimator, seed.norm, seed.invalid_action_penalty], ["grpo", "mean", 1]);
  const bad = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { method: "grpo", env: { id: "sokoban" }, seed: { skill_source: "reference" } },
  });
  assert.equal(bad.status, 400);
  assert.deepEqual((await bad.json()).errors.map((e: { path: string }) => e.path), [
    "seed.skill_source",
  ]);
});

Deno.test({
  name: "close the envs route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
