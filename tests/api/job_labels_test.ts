/**
 * Jobs by name through the real server (HTTP, Postgres, S3 server) and the CLI: `name` (or
 * OpenAI's `suffix`) and `metadata` at submit, returned in every job view, filtered in listings;
 * bad values a 400 naming the field with nothing stored; the list's `model` and `result`.
 */
import assert from "node:assert/strict";
import { failJob, fenceOf, recordMetrics, succeedJob } from "../../jobs/mod.ts";
import { runCli } from "./client/_run_cli.ts";
import { serveApi } from "../../api/main.ts";
import { claimAs, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();
for (const [k, v] of Object.entries({ ...fx.s3Env, DATABASE_URL: fx.url })) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const base = `http://127.0.0.1:${api.port}`;

async function call(
  method: string,
  path: string,
  options: { key?: string; json?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.key ?? fx.keyA}`,
    ...options.headers,
  };
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: options.json === undefined ? undefined : JSON.stringify(options.json),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function jobCount(): Promise<number> {
  const [row] = await fx.db.query<{ n: number }>("select count(*)::int as n from jobs");
  return Number(row.n);
}

function cli(args: string[]) {
  return runCli(args, { SEED_API_URL: base, SEED_API_KEY: fx.keyA });
}

Deno.test("a job submitted with a name and metadata shows both in every view, and suffix names it too", async () => {
  const metadata = { team: "nlp", sweep: "lr-3", note: "" };
  const made = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, name: "sokoban lr 3e-4", metadata },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.equal(made.body.name, "sokoban lr 3e-4");
  assert.deepEqual(made.body.metadata, metadata);
  assert.equal(made.body.model, "builtin:tiny");
  assert.equal(made.body.result, null);
  // The labels are not part of the spec (a copy of the spec submits the same training).
  assert.equal("name" in made.body.spec, false);
  assert.equal("metadata" in made.body.spec, false);
  const got = await call("GET", `/v1/jobs/${made.body.id}`);
  assert.equal(got.body.name, "sokoban lr 3e-4");
  assert.deepEqual(got.body.metadata, metadata);

  const suffixed = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, suffix: "s1" },
  });
  assert.equal(suffixed.status, 201);
  assert.equal(suffixed.body.name, "s1");
  assert.deepEqual(suffixed.body.metadata, {});
  const plain = await call("POST", "/v1/jobs", { json: { env: { id: "sokoban" } } });
  assert.equal(plain.body.name, null);
  assert.deepEqual(plain.body.metadata, {});
  for (const id of [made.body.id, suffixed.body.id, plain.body.id]) {
    await call("POST", `/v1/jobs/${id}/cancel`);
  }
});

Deno.test("metadata comes back in the order it was submitted, in the job, the list and the submit answer", async () => {
  // jsonb alone gave these back shortest key first: b, zeta, team-lead, a-much-longer-key.
  const metadata = { zeta: "1", "a-much-longer-key": "2", b: "3", "team-lead": "4" };
  const order = Object.keys(metadata);
  const raw = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${fx.keyA}`, "content-type": "application/json" },
    });
    return await res.text();
  };
  /** The metadata keys in the order the answer's text holds them. */
  const keysIn = (text: string, id: string) => {
    const body = JSON.parse(text);
    const job = body.jobs ? body.jobs.find((j: { id: string }) => j.id === id) : body;
    return Object.keys(job.metadata);
  };
  const made = await raw("/v1/jobs", {
    method: "POST",
    body: JSON.stringify({ env: { id: "sokoban" }, name: "ordered", metadata }),
  });
  const id = JSON.parse(made).id;
  assert.deepEqual(keysIn(made, id), order);
  assert.deepEqual(keysIn(await raw(`/v1/jobs/${id}`), id), order);
  assert.deepEqual(keysIn(await raw("/v1/jobs?name=ordered"), id), order);
  // The text itself, not only the parsed object: each key after the one before it.
  const text = await raw(`/v1/jobs/${id}`);
  const at = order.map((k) => text.indexOf(`"${k}":"`));
  assert.deepEqual([...at].sort((x, y) => x - y), at, text);
  // Filtering by a pair still finds it (the containment index is unchanged).
  assert.deepEqual(keysIn(await raw("/v1/jobs?metadata%5Bb%5D=3"), id), order);
  await call("POST", `/v1/jobs/${id}/cancel`);
});

Deno.test("bad names and metadata are a 400 naming the field, and nothing is stored", async () => {
  const before = await jobCount();
  const cases: [Record<string, unknown>, string][] = [
    [{ name: "" }, "name"],
    [{ name: "x".repeat(129) }, "name"],
    [{ name: "two\nlines" }, "name"],
    [{ name: 7 }, "name"],
    // C1 controls, line separators and bidirectional overrides/isolates are control characters.
    [{ name: "a\u0085b" }, "name"],
    [{ name: "a\u2028b" }, "name"],
    [{ name: "evil\u202egpj.exe" }, "name"],
    [{ name: "a\u2066b\u2069" }, "name"],
    [{ suffix: "a\u009bb" }, "suffix"],
    [{ metadata: { "k\u202e": "v" } }, "metadata.k\u202e"],
    // `__proto__` would be lost (or set the prototype) in a plain object: refused, never dropped.
    [JSON.parse('{"metadata":{"__proto__":"x"}}'), "metadata.__proto__"],
    [JSON.parse('{"metadata":{"__proto__":{"a":"b"}}}'), "metadata.__proto__"],
    [{ name: "a", suffix: "b" }, "suffix"],
    [{ metadata: { k: 1 } }, "metadata.k"],
    [{ metadata: { k: "v".repeat(513) } }, "metadata.k"],
    [{ metadata: { ["k".repeat(65)]: "v" } }, "metadata"],
    [
      { metadata: Object.fromEntries([...Array(17).keys()].map((i) => [`k${i}`, "v"])) },
      "metadata",
    ],
    [{ metadata: ["a"] }, "metadata"],
  ];
  for (const [labels, path] of cases) {
    const res = await call("POST", "/v1/jobs", { json: { env: { id: "sokoban" }, ...labels } });
    assert.equal(res.status, 400, JSON.stringify(labels));
    assert.ok(
      res.body.errors.some((e: { path: string }) => e.path.startsWith(path)),
      `${JSON.stringify(labels)}: ${JSON.stringify(res.body.errors)}`,
    );
  }
  // name and suffix that differ: one sentence, at suffix.
  const differ = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, name: "a", suffix: "b" },
  });
  assert.equal(differ.status, 400);
  assert.match(differ.body.detail, /^Cannot use suffix as it names the job like name does/);
  assert.equal((differ.body.detail.match(/Cannot/g) ?? []).length, 1, differ.body.detail);
  assert.equal(differ.body.errors[0].message, differ.body.detail);
  // A bad key's message says what is wrong with it, at `metadata.<key>`.
  for (
    const [key, message] of [
      ["k".repeat(65), /at most 64 characters/],
      ["", /must not be empty/],
      ["a\u0001", /control characters/],
      ["__proto__", /__proto__ .*reserved/],
    ] as const
  ) {
    const res = await call("POST", "/v1/jobs", {
      json: { env: { id: "sokoban" }, metadata: JSON.parse(`{${JSON.stringify(key)}:"v"}`) },
    });
    assert.equal(res.status, 400);
    const error = res.body.errors.find((e: { path: string }) => e.path.startsWith("metadata"));
    assert.equal(error.path, `metadata.${key}`, JSON.stringify(res.body.errors));
    assert.match(error.message, message);
    assert.doesNotMatch(res.body.detail, /Invalid key in record/);
  }
  // A spec error and a label error are both reported.
  const both = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, name: "", random_seed: -1 },
  });
  assert.deepEqual(both.body.errors.map((e: { path: string }) => e.path).sort(), [
    "name",
    "random_seed",
  ]);
  // Exactly 16 keys of 64 characters with values of 512 are accepted.
  const limits = Object.fromEntries(
    [...Array(16).keys()].map((i) => [`${i}`.padStart(64, "k"), "v".repeat(512)]),
  );
  assert.equal(await jobCount(), before);
  const ok = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, name: "n".repeat(128), metadata: limits },
  });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  assert.equal(await jobCount(), before + 1);
  await call("POST", `/v1/jobs/${ok.body.id}/cancel`);
});

Deno.test("the same Idempotency-Key with another name is a 409, with the same name the first job", async () => {
  const key = crypto.randomUUID();
  const body = { env: { id: "sokoban" }, name: "idem", metadata: { a: "1" } };
  const first = await call("POST", "/v1/jobs", { json: body, headers: { "idempotency-key": key } });
  assert.equal(first.status, 201);
  const again = await call("POST", "/v1/jobs", { json: body, headers: { "idempotency-key": key } });
  assert.equal(again.status, 200);
  assert.equal(again.body.id, first.body.id);
  const renamed = await call("POST", "/v1/jobs", {
    json: { ...body, name: "other" },
    headers: { "idempotency-key": key },
  });
  assert.equal(renamed.status, 409);
  await call("POST", `/v1/jobs/${first.body.id}/cancel`);
});

Deno.test("GET /v1/jobs filters by exact name, name prefix and every metadata pair, per tenant", async () => {
  const run = crypto.randomUUID().slice(0, 8);
  const submit = async (name: string, metadata: Record<string, string>, key = fx.keyA) =>
    (await call("POST", "/v1/jobs", { key, json: { env: { id: "sokoban" }, name, metadata } }))
      .body.id as string;
  const a = await submit(`${run}-lr-1`, { run, lr: "1e-3", team: "nlp" });
  const b = await submit(`${run}-lr-2`, { run, lr: "2e-3", team: "nlp" });
  const c = await submit(`${run}_x%`, { run, lr: "1e-3", team: "vision" });
  const other = await submit(`${run}-lr-1`, { run, lr: "1e-3", team: "nlp" }, fx.keyB);
  const ids = async (query: string) =>
    ((await call("GET", `/v1/jobs?${query}`)).body.jobs as { id: string }[]).map((j) => j.id);

  assert.deepEqual(await ids(`name=${run}-lr-1`), [a]);
  assert.deepEqual(await ids(`name_prefix=${run}-lr-`), [b, a]);
  // Names match case-sensitively, exact or prefix (api/README.md, CLI `list`).
  assert.deepEqual(await ids(`name=${run}-LR-1`), []);
  assert.deepEqual(await ids(`name_prefix=${run}-LR-`), []);
  // `%` and `_` in a prefix are the characters themselves, not patterns.
  assert.deepEqual(await ids(`name_prefix=${encodeURIComponent(`${run}_x%`)}`), [c]);
  assert.deepEqual(await ids(`name_prefix=${run}_`), [c]);
  assert.deepEqual(await ids(`metadata[run]=${run}&metadata[lr]=1e-3`), [c, a]);
  assert.deepEqual(await ids(`metadata[run]=${run}&metadata[lr]=1e-3&metadata[team]=nlp`), [a]);
  assert.deepEqual(await ids(`metadata[run]=${run}&status=queued&limit=2`), [c, b]);
  assert.deepEqual(await ids(`metadata[run]=${run}&metadata[team]=robots`), []);
  // Paging keeps the filter.
  const page = await call("GET", `/v1/jobs?metadata[run]=${run}&limit=2`);
  const next = await call(
    "GET",
    `/v1/jobs?metadata[run]=${run}&limit=2&cursor=${page.body.next_cursor}`,
  );
  assert.deepEqual(next.body.jobs.map((j: { id: string }) => j.id), [a]);
  assert.equal(next.body.next_cursor, null);

  const badKey = await call("GET", `/v1/jobs?metadata[${"k".repeat(65)}]=v`);
  assert.equal(badKey.status, 400);
  assert.match(badKey.body.errors[0].path, /^metadata/);
  assert.match(badKey.body.errors[0].message, /at most 64 characters/);
  // `metadata[__proto__]` is not dropped from the filter (which would list every job): a 400.
  const proto = await call("GET", `/v1/jobs?metadata[__proto__]=x`);
  assert.equal(proto.status, 400, JSON.stringify(proto.body));
  assert.equal(proto.body.errors[0].path, "metadata.__proto__");
  const badName = await call("GET", `/v1/jobs?name=${"n".repeat(129)}`);
  assert.equal(badName.status, 400);
  assert.equal(badName.body.errors[0].path, "name");
  const twice = await call("GET", `/v1/jobs?metadata[lr]=1&metadata[lr]=2`);
  assert.equal(twice.status, 400);
  // A NUL in a value (which Postgres jsonb cannot hold) is a 400 at the key, in JSON and SSE.
  for (const accept of ["application/json", "text/event-stream"]) {
    const nul = await call("GET", `/v1/jobs?metadata%5Bk%5D=a%00b`, { headers: { accept } });
    assert.equal(nul.status, 400, JSON.stringify(nul.body));
    assert.equal(nul.body.errors[0].path, "metadata.k");
    assert.match(nul.body.errors[0].message, /NUL/);
  }
  for (const id of [a, b, c]) await call("POST", `/v1/jobs/${id}/cancel`);
  await call("POST", `/v1/jobs/${other}/cancel`, { key: fx.keyB });
});

Deno.test("the list shows each job's model, latest evaluation and failure reason", async () => {
  const run = crypto.randomUUID().slice(0, 8);
  const submit = async (name: string) =>
    (await call("POST", "/v1/jobs", {
      json: { env: { id: "sokoban" }, name, priority: 1000, metadata: { run } },
    })).body.id as string;
  const won = await submit("won");
  let job = await claimAs(fx.db, won);
  await recordMetrics(fx.db, fenceOf(job), 0, {
    "eval/test_seen/success_rate": 0.25,
    "eval/test_unseen/success_rate": 0.125,
  });
  await recordMetrics(fx.db, fenceOf(job), 5, { loss: 1.5 });
  await recordMetrics(fx.db, fenceOf(job), 10, {
    "eval/test_seen/success_rate": 0.75,
    "eval/test_unseen/success_rate": 0.625,
    "eval/test_seen/score": 3,
  });
  await recordMetrics(fx.db, fenceOf(job), 11, { loss: 1 });
  await succeedJob(fx.db, fenceOf(job));
  const lost = await submit("lost");
  job = await claimAs(fx.db, lost);
  await failJob(fx.db, fenceOf(job), "Cannot train: the environment went away");

  const page = await call("GET", `/v1/jobs?metadata[run]=${run}`);
  const [l, w] = page.body.jobs;
  assert.equal(w.id, won);
  assert.equal(w.model, "builtin:tiny");
  assert.deepEqual(w.result, { step: 10, success_rate: { test_seen: 0.75, test_unseen: 0.625 } });
  assert.equal(w.error, null);
  assert.equal(l.id, lost);
  assert.equal(l.result, null);
  assert.equal(l.error, "Cannot train: the environment went away");
  assert.deepEqual((await call("GET", `/v1/jobs/${won}`)).body.result, w.result);

  const table = await cli(["list", "--metadata", `run=${run}`]);
  assert.equal(table.code, 0, table.err);
  const [header, first, second] = table.out.split("\n");
  assert.match(header, /^ID +NAME +MODEL +METHOD +STATUS/);
  assert.match(first, new RegExp(`^${lost} +lost +builtin:tiny .* Cannot train: the environment`));
  assert.match(
    second,
    new RegExp(`^${won} +won +builtin:tiny .* test_seen 75%, test_unseen 63% \\(step 10\\)$`),
  );
});

Deno.test("the CLI submits with --name and --metadata, filters the list by them and shows them", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const run = crypto.randomUUID().slice(0, 8);
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const submitted = await cli([
      "submit",
      `${dir}/spec.json`,
      "--name",
      `${run}-cli`,
      "--metadata",
      `run=${run}`,
      "--metadata",
      "expr=a=b",
    ]);
    assert.equal(submitted.code, 0, submitted.err);
    const id = submitted.out.trim();
    const status = await cli(["status", id]);
    assert.match(status.out, new RegExp(`^name +${run}-cli$`, "m"));
    assert.match(status.out, new RegExp(`^metadata +run=${run}, expr=a=b$`, "m"));
    for (
      const args of [["--name", `${run}-cli`], ["--name-prefix", run], ["--metadata", `run=${run}`]]
    ) {
      const list = await cli(["list", ...args]);
      assert.match(list.out.split("\n")[1], new RegExp(`^${id} +${run}-cli +builtin:tiny`));
      assert.equal(list.out.split("\n").length, 3, list.out);
    }
    const none = await cli(["list", "--name", `${run}-none`]);
    assert.equal(none.out, "");
    assert.equal(none.err, "no jobs\n");
    // Case-sensitive, as the help says; `_` is the character itself, not any one character.
    for (
      const args of [["--name", `${run}-CLI`], ["--name-prefix", `${run}-C`], [
        "--name-prefix",
        `${run}_`,
      ]]
    ) {
      const other = await cli(["list", ...args]);
      assert.equal(other.err, "no jobs\n", `list ${args.join(" ")}`);
    }
    const bad = await cli(["list", "--metadata", "novalue"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--metadata "novalue" as it must be KEY=VALUE/);
    await cli(["cancel", id]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "stop the job labels test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
