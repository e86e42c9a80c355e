import assert from "node:assert/strict";
import {
  acknowledgeCancel,
  failJob,
  fenceOf,
  parseJobSpec,
  recordMetrics,
  setProgress,
  submitJob,
  succeedJob,
} from "../../jobs/mod.ts";
import { createApp } from "../../api/app.ts";
import { renameJobId, req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();
const spec = { env: { id: "sokoban" } };

async function problem(res: Response, status: number) {
  assert.equal(res.status, status, await res.clone().text());
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  const body = await res.json();
  assert.equal(body.status, status);
  assert.equal(typeof body.detail, "string");
  return body;
}

Deno.test("POST /v1/jobs queues a job with defaults filled in and a Location header", async () => {
  const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
  assert.equal(res.status, 201);
  const job = await res.json();
  assert.equal(res.headers.get("location"), `/v1/jobs/${job.id}`);
  assert.equal(job.status, "queued");
  assert.equal(job.method, "seed");
  assert.equal(job.attempt, 0);
  assert.equal(job.spec.rollout.group_size, 8);
  assert.equal(job.progress, null);
});

Deno.test("POST /v1/jobs fills a left-out env.max_turns with the environment's default_max_turns from GET /v1/envs, and keeps a set one", async () => {
  const envs = (await (await req(fx.app, "GET", "/v1/envs", { key: fx.keyA })).json()).envs;
  const defaults = Object.fromEntries(
    envs.map((e: { id: string; default_max_turns: number }) => [e.id, e.default_max_turns]),
  );
  // Each differs from the old blanket default of 20 but sokoban's.
  assert.deepEqual(defaults, { sokoban: 20, household: 30, webshop: 15, ezpoints: 16, search: 4 });
  for (const [id, turns] of Object.entries(defaults)) {
    // ezpoints shows images by default: builtin:tiny-vl reads them.
    const model = { base: id === "ezpoints" ? "builtin:tiny-vl" : "builtin:tiny" };
    const res = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: { env: { id }, model },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const job = await res.json();
    assert.equal(job.spec.env.max_turns, turns, id);
    const stored = await (await req(fx.app, "GET", `/v1/jobs/${job.id}`, { key: fx.keyA })).json();
    assert.equal(stored.spec.env.max_turns, turns, id);
  }
  const set = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "household", max_turns: 20 } },
  });
  assert.equal((await set.json()).spec.env.max_turns, 20);
  // An environment the list has no default for is left to the worker (maxTurnsOf).
  const app = createApp({
    db: fx.db,
    store: fx.store,
    authCacheMs: 0,
    envs: () => [{ id: "custom", splits: [] }],
  });
  const custom = await req(app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "custom" } },
  });
  assert.equal(custom.status, 201, await custom.clone().text());
  assert.equal((await custom.json()).spec.env.max_turns, undefined);
});

Deno.test("a job keeps the spec fields as submitted in submitted_spec, defaults left out, beside the stored spec with them filled in", async () => {
  const posted = {
    env: { id: "household", options: { families: ["pick_and_place"], prompt: "compact" } },
    steps: 3,
    eval: { episodes: 32 },
  };
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { name: "kept", metadata: { team: "rl" }, ...posted },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const created = await res.json();
  const job = await (await req(fx.app, "GET", `/v1/jobs/${created.id}`, { key: fx.keyA })).json();
  // What was posted, labels apart: no default, not even inside `eval`.
  assert.deepEqual(job.submitted_spec, posted);
  assert.deepEqual(created.submitted_spec, posted);
  // The stored spec has every default, those that depend on other fields included.
  assert.equal(job.spec.method, "seed");
  assert.equal(job.spec.seed.skill_source, "policy");
  assert.equal(job.spec.seed.max_step_skills, 0);
  assert.equal(job.spec.advantage.estimator, "grpo");
  assert.equal(job.spec.advantage.norm, "mean_std");
  assert.equal(job.spec.env.max_turns, 30);
  assert.equal(job.spec.eval.episodes, 32);
  assert.equal(typeof job.spec.eval.temperature, "number");
  // Submitted again with one field changed, the defaults that depend on it follow it.
  const again = async (edit: Record<string, unknown>) => {
    const r = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: { ...job.submitted_spec, ...edit },
    });
    assert.equal(r.status, 201, await r.clone().text());
    return (await r.json()).spec;
  };
  assert.equal((await again({ seed: { skill_source: "reference" } })).seed.max_step_skills, 5);
  assert.equal((await again({ method: "gigpo" })).advantage.estimator, "gigpo");
  // A job the service queues itself (not through POST /v1/jobs) has none.
  const { job: internal } = await submitJob(fx.db, {
    tenantId: fx.tenantA.id,
    spec: parseJobSpec(spec),
  });
  const shown = await (await req(fx.app, "GET", `/v1/jobs/${internal.id}`, { key: fx.keyA }))
    .json();
  assert.equal(shown.submitted_spec, null);
  assert.equal(shown.spec.rollout.group_size, 8);
});

Deno.test("submitted_spec keeps the posted key order, where Postgres's jsonb would sort it", async () => {
  // jsonb orders an object's keys shorter first, then bytewise: each object here is posted in
  // another order, so the answer matches the posted text only if the order is kept.
  const body = '{"steps":3,"env":{"options":{"prompt":"compact","families":["pick_and_place"]},' +
    '"id":"household"},"eval":{"episodes":32}}';
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    body,
    headers: { "content-type": "application/json" },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = await res.json();
  const job = await (await req(fx.app, "GET", `/v1/jobs/${id}`, { key: fx.keyA })).json();
  assert.equal(JSON.stringify(job.submitted_spec), body);
});

Deno.test("POST /v1/jobs answers 400 for malformed JSON", async () => {
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    body: '{"env": ',
    headers: { "content-type": "application/json" },
  });
  const body = await problem(res, 400);
  assert.match(body.detail, /JSON/);
});

Deno.test("POST /v1/jobs answers 400 with zod's field path for a schema violation", async () => {
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "sokoban" }, rollout: { group_size: 0 }, bogus: 1 },
  });
  const body = await problem(res, 400);
  const paths = body.errors.map((e: { path: string }) => e.path);
  assert.ok(paths.includes("rollout.group_size"), JSON.stringify(body.errors));
  assert.ok(body.errors.some((e: { code: string }) => e.code === "unrecognized_keys"));
});

Deno.test("requests without a key, with a malformed key or an unknown key are 401", async () => {
  await problem(await req(fx.app, "GET", "/v1/jobs"), 401);
  await problem(
    await req(fx.app, "GET", "/v1/jobs", { headers: { authorization: "Bearer nope" } }),
    401,
  );
  // A key cut short in copying starts with seed_ like a good one: the detail says what is missing.
  const cut = await problem(
    await req(fx.app, "GET", "/v1/jobs", { key: fx.keyA.slice(0, 20) }),
    401,
  );
  assert.match(cut.detail, /with the whole key \(seed_ and 43 letters, digits, - or _/);
  await problem(await req(fx.app, "GET", "/v1/jobs", { key: `seed_${"x".repeat(43)}` }), 401);
  await problem(
    await req(fx.app, "GET", "/v1/jobs", { headers: { authorization: "Basic a" } }),
    401,
  );
});

Deno.test("every /v1 route refuses a request without a valid key before touching anything", async () => {
  const id = crypto.randomUUID();
  const routes = [
    ["POST", "/v1/jobs"],
    ["GET", "/v1/jobs"],
    ["GET", `/v1/jobs/${id}`],
    ["POST", `/v1/jobs/${id}/cancel`],
    ["GET", `/v1/jobs/${id}/events`],
    ["GET", `/v1/jobs/${id}/metrics`],
    ["GET", `/v1/jobs/${id}/checkpoints`],
    ["GET", `/v1/jobs/${id}/checkpoints/1/archive`],
    ["GET", `/v1/jobs/${id}/checkpoints/1/files/config.json`],
    ["GET", `/v1/jobs/${id}/skills`],
    ["GET", "/v1/envs"],
  ];
  for (const [method, path] of routes) {
    const res = await req(fx.app, method, path, { json: method === "POST" ? spec : undefined });
    assert.equal((await problem(res, 401)).title, "Unauthorized", `${method} ${path}`);
  }
});

Deno.test("the same Idempotency-Key returns the first job and a different body is a 409", async () => {
  const headers = { "idempotency-key": `k-${crypto.randomUUID()}` };
  const first = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec, headers });
  assert.equal(first.status, 201);
  const again = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec, headers });
  assert.equal(again.status, 200);
  assert.equal((await again.json()).id, (await first.json()).id);
  const other = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "webshop" } },
    headers,
  });
  await problem(other, 409);
  const bad = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: spec,
    headers: { "idempotency-key": "x".repeat(300) },
  });
  assert.equal((await problem(bad, 400)).errors[0].path, "headers.Idempotency-Key");
});

Deno.test("a body over the limit is a 413 and nothing is stored", async () => {
  const before = (await fx.db.query("select count(*)::int as n from jobs"))[0].n;
  const big = { env: { id: "sokoban", options: { pad: "x".repeat(2 << 20) } } };
  await problem(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: big }), 413);
  assert.equal((await fx.db.query("select count(*)::int as n from jobs"))[0].n, before);
});

Deno.test("an env id the env provider does not list is a 422 at env.id", async () => {
  const app = createApp({
    db: fx.db,
    store: fx.store,
    envs: () => [{ id: "sokoban", splits: [{ name: "train", description: "t" }] }],
  });
  const ok = await req(app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
  assert.equal(ok.status, 201);
  const res = await req(app, "POST", "/v1/jobs", { key: fx.keyA, json: { env: { id: "chess" } } });
  assert.equal((await problem(res, 422)).errors[0].path, "env.id");
  const envs = await req(app, "GET", "/v1/envs", { key: fx.keyA });
  assert.deepEqual((await envs.json()).envs.map((e: { id: string }) => e.id), ["sokoban"]);
});

Deno.test("a text-only model on an image env is a 422 at model.base at submit, and nothing is stored", async () => {
  const before = (await fx.db.query("select count(*)::int as n from jobs"))[0].n;
  for (
    const env of [{ id: "ezpoints" }, { id: "sokoban", options: { render: "image" } }]
  ) {
    const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: { env } });
    const body = await problem(res, 422);
    assert.deepEqual(body.errors.map((e: { path: string }) => e.path), ["model.base"], env.id);
    assert.match(body.detail, /builtin:tiny-vl/);
  }
  assert.equal((await fx.db.query("select count(*)::int as n from jobs"))[0].n, before);
  const vl = { env: { id: "ezpoints" }, model: { base: "builtin:tiny-vl" } };
  assert.equal((await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: vl })).status, 201);
  const text = { env: { id: "ezpoints", options: { render: "text" } } };
  assert.equal((await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: text })).status, 201);
});

Deno.test("a job: base trained from builtin:tiny is refused on an image env too, naming the root", async () => {
  const post = (json: unknown) => req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json });
  const text = await (await post({ env: { id: "sokoban" } })).json();
  const chained = await (await post({ env: { id: "sokoban" }, model: { base: `job:${text.id}` } }))
    .json();
  const vl = await (await post({
    env: { id: "sokoban", options: { render: "image" } },
    model: { base: "builtin:tiny-vl" },
  })).json();
  for (const base of [`job:${text.id}`, `job:${chained.id}@3`]) {
    const body = await problem(await post({ env: { id: "ezpoints" }, model: { base } }), 422);
    assert.deepEqual(body.errors.map((e: { path: string }) => e.path), ["model.base"], base);
    assert.match(body.errors[0].message, new RegExp(`${base} \\(trained from builtin:tiny\\)`));
  }
  const ok = await post({ env: { id: "ezpoints" }, model: { base: `job:${vl.id}` } });
  assert.equal(ok.status, 201);
  // Another tenant's job is not followed (checkSpecRefs answers unknown_job, as before).
  const foreign = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyB,
    json: { env: { id: "ezpoints" }, model: { base: `job:${text.id}` } },
  });
  assert.equal((await problem(foreign, 422)).errors[0].code, "unknown_job");
});

Deno.test("GET /v1/jobs pages newest first with a cursor, filters by status and bounds limit", async () => {
  const key = (await import("../../jobs/api_keys.ts")).createKey;
  const { key: k } = await key(fx.db, `pager-${crypto.randomUUID()}`);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    ids.push((await (await req(fx.app, "POST", "/v1/jobs", { key: k, json: spec })).json()).id);
  }
  await req(fx.app, "POST", `/v1/jobs/${ids[0]}/cancel`, { key: k });
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor ? `&cursor=${cursor}` : "";
    const page = await (await req(fx.app, "GET", `/v1/jobs?limit=2${q}`, { key: k })).json();
    assert.ok(page.jobs.length <= 2);
    seen.push(...page.jobs.map((j: { id: string }) => j.id));
    cursor = page.next_cursor;
  } while (cursor);
  assert.deepEqual(seen, [...ids].reverse());
  const cancelled = await (await req(fx.app, "GET", "/v1/jobs?status=cancelled", { key: k }))
    .json();
  assert.deepEqual(cancelled.jobs.map((j: { id: string }) => j.id), [ids[0]]);
  const both = await (await req(fx.app, "GET", "/v1/jobs?status=queued,cancelled", { key: k }))
    .json();
  assert.equal(both.jobs.length, 5);
  assert.equal(
    (await problem(await req(fx.app, "GET", "/v1/jobs?limit=1000", { key: k }), 400))
      .errors[0].path,
    "limit",
  );
  assert.equal(
    (await problem(await req(fx.app, "GET", "/v1/jobs?status=done", { key: k }), 400))
      .errors[0].path,
    "status[0]",
  );
  assert.equal(
    (await problem(await req(fx.app, "GET", "/v1/jobs?cursor=zzz", { key: k }), 400))
      .errors[0].path,
    "cursor",
  );
  assert.equal(
    (await problem(await req(fx.app, "GET", "/v1/jobs?x=1", { key: k }), 400))
      .errors[0].code,
    "unrecognized_keys",
  );
});

Deno.test("GET /v1/jobs/{id} shows progress with stage, step and ETA, and the latest metrics", async () => {
  const job = await runningJob(fx, fx.keyA);
  const created = { id: job.id };
  await setProgress(fx.db, fenceOf(job), { stage: "rollout", step: 3, totalSteps: 20, etaS: 42 });
  await recordMetrics(fx.db, fenceOf(job), 3, { success_rate: 0.5, mean_reward: 1.25 });
  const res = await req(fx.app, "GET", `/v1/jobs/${created.id}`, { key: fx.keyA });
  assert.equal(res.status, 200);
  const view = await res.json();
  assert.equal(view.status, "running");
  assert.deepEqual(view.progress, { stage: "rollout", step: 3, total_steps: 20, eta_s: 42 });
  assert.equal(view.latest_metrics.success_rate, 0.5);
  assert.equal(view.error, null);
  assert.ok(view.started_at);
  // a running job's cancel moves it to cancelling
  const cancel = await req(fx.app, "POST", `/v1/jobs/${created.id}/cancel`, { key: fx.keyA });
  assert.equal(cancel.status, 202);
  assert.equal((await cancel.json()).status, "cancelling");
});

Deno.test("another tenant's job, an unknown id and a malformed id are all 404", async () => {
  const created = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec }))
    .json();
  for (const path of ["", "/cancel", "/events", "/metrics", "/checkpoints", "/skills"]) {
    const method = path === "/cancel" ? "POST" : "GET";
    await problem(
      await req(fx.app, method, `/v1/jobs/${created.id}${path}`, { key: fx.keyB }),
      404,
    );
  }
  await problem(await req(fx.app, "GET", `/v1/jobs/${crypto.randomUUID()}`, { key: fx.keyA }), 404);
  await problem(await req(fx.app, "GET", "/v1/jobs/not-a-uuid", { key: fx.keyA }), 404);
  // and B's attempt to cancel changed nothing
  const after = await (await req(fx.app, "GET", `/v1/jobs/${created.id}`, { key: fx.keyA })).json();
  assert.equal(after.status, "queued");
});

Deno.test("POST /v1/jobs/{id}/cancel cancels a queued job at once", async () => {
  const created = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec }))
    .json();
  const res = await req(fx.app, "POST", `/v1/jobs/${created.id}/cancel`, { key: fx.keyA });
  assert.equal(res.status, 202);
  const job = await res.json();
  assert.equal(job.status, "cancelled");
  assert.ok(job.finished_at);
});

Deno.test("cancelling a job that already ended answers 409 naming its state and changes nothing", async () => {
  for (const ending of ["succeeded", "failed", "cancelled"] as const) {
    const job = await runningJob(fx, fx.keyA, spec);
    if (ending === "succeeded") await succeedJob(fx.db, fenceOf(job));
    if (ending === "failed") await failJob(fx.db, fenceOf(job), "RuntimeError: out of memory");
    if (ending === "cancelled") {
      await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA });
      await acknowledgeCancel(fx.db, fenceOf(job));
    }
    const read = async (path: string) =>
      await (await req(fx.app, "GET", `/v1/jobs/${job.id}${path}`, { key: fx.keyA })).json();
    const [before, eventsBefore] = [await read(""), await read("/events")];
    assert.equal(before.status, ending);
    const res = await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA });
    const body = await problem(res, 409);
    assert.equal(
      body.detail,
      `Cannot cancel job ${job.id} as it must be queued or running: it has already ended as ${ending}; nothing changed`,
    );
    assert.deepEqual(await read(""), before, ending);
    assert.deepEqual(await read("/events"), eventsBefore, ending);
  }
});

Deno.test("cancelling a job that is already cancelling answers 202 with it still cancelling", async () => {
  const job = await runningJob(fx, fx.keyA, spec);
  const first = await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA });
  assert.equal((await first.json()).status, "cancelling");
  const again = await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA });
  assert.equal(again.status, 202);
  assert.equal((await again.json()).status, "cancelling");
  assert.equal((await acknowledgeCancel(fx.db, fenceOf(job))).status, "cancelled");
});

Deno.test("a job cancelled while running whose run then fails or succeeds ends cancelled, the failure kept in its error", async () => {
  for (const ending of ["fail", "succeed"] as const) {
    const job = await runningJob(fx, fx.keyA);
    const cancel = await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA });
    assert.equal(cancel.status, 202);
    assert.equal((await cancel.json()).status, "cancelling");
    // The run ends before its worker acts on the cancel, as the worker's finish path ends it.
    const ended = ending === "fail"
      ? await failJob(fx.db, fenceOf(job), "RuntimeError: the environment server went away")
      : await succeedJob(fx.db, fenceOf(job));
    assert.equal(ended.status, "cancelled", ending);
    const view = await (await req(fx.app, "GET", `/v1/jobs/${job.id}`, { key: fx.keyA })).json();
    assert.equal(view.status, "cancelled", ending);
    assert.ok(view.finished_at);
    assert.equal(
      view.error,
      ending === "fail" ? "RuntimeError: the environment server went away" : null,
    );
    const events = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/events`, {
      key: fx.keyA,
    })).json();
    const statuses = events.events.filter((e: { type: string }) => e.type === "status")
      .map((e: { data: { status: string } }) => e.data.status);
    assert.deepEqual(statuses.slice(-2), ["cancelling", "cancelled"], ending);
    const listed = await (await req(fx.app, "GET", "/v1/jobs?status=failed", { key: fx.keyA }))
      .json();
    assert.ok(!listed.jobs.some((j: { id: string }) => j.id === job.id));
  }
});

Deno.test("an unknown route is a problem+json 404", async () => {
  await problem(await req(fx.app, "GET", "/v2/nothing"), 404);
});

Deno.test("GET /v1/jobs?id_prefix= lists the tenant's jobs whose id starts with the hex digits given", async () => {
  const head = crypto.randomUUID().slice(0, 8);
  const ids = [`${head}-aaaa-4000-8000-000000000001`, `${head}-abcd-4000-8000-000000000002`];
  for (const id of ids) {
    const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
    await renameJobId(fx.db, (await res.json()).id, id);
  }
  // Another tenant's job with the same start is not theirs to find.
  const other = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyB, json: spec });
  await renameJobId(fx.db, (await other.json()).id, `${head}-aaaa-4000-8000-000000000003`);
  const list = async (prefix: string) => {
    const res = await req(fx.app, "GET", `/v1/jobs?id_prefix=${encodeURIComponent(prefix)}`, {
      key: fx.keyA,
    });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()).jobs as { id: string }[]).map((j) => j.id).sort();
  };
  assert.deepEqual(await list(head), ids);
  assert.deepEqual(await list(head.toUpperCase()), ids);
  assert.deepEqual(await list(`${head}-aa`), [ids[0]]);
  assert.deepEqual(await list(`${head}ab`), [ids[1]]);
  assert.deepEqual(await list(`${head}-`), ids);
  assert.deepEqual(await list(ids[1]), [ids[1]]);
  assert.deepEqual(await list(`${head}-b`), []);
  // Fewer than 8 or more than 32 digits, other characters, a SQL pattern or a hyphen out of
  // place: a 400.
  for (
    const bad of [
      head.slice(0, 7),
      `${head.slice(0, 7)}g`,
      `${head}%`,
      "%",
      `${head.slice(0, 4)}-${head.slice(4)}`,
      // More than a whole id's 32 digits (up to the 36 characters a hyphenated id has).
      `${head}${"0".repeat(25)}`,
      `${head}${"0".repeat(28)}`,
    ]
  ) {
    const res = await req(fx.app, "GET", `/v1/jobs?id_prefix=${encodeURIComponent(bad)}`, {
      key: fx.keyA,
    });
    const body = await problem(res, 400);
    assert.equal(body.errors[0].path, "id_prefix", bad);
    assert.match(body.errors[0].message, /8 to 32 hex digits/);
  }
});

Deno.test({
  name: "close the jobs route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
