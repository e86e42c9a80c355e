/**
 * Strict input at the HTTP boundary: JSON bodies only as `application/json` (415), malformed
 * JSON pointed at by line, column and byte (400), every documented JobSpec bound enforced,
 * over-long request targets and headers answered as problem+json (414, 431) through a real
 * server, and 405 with `Allow` for a known path asked with another method.
 */
import assert from "node:assert/strict";
import { req, startApiFixture } from "./_fixture.ts";
import { MAX_HEADER_BYTES, MAX_HEADERS, MAX_TARGET_CHARS } from "../../api/app.ts";
import { jsonSyntaxError } from "../../api/json_syntax.ts";
import { parseJobSpec, parseStoredJobSpec, RETIRED_SEED_FIELDS } from "../../jobs/spec.ts";

const fx = await startApiFixture({ envs: () => [] });
const SPEC = JSON.stringify({ env: { id: "sokoban" } });

async function jobCount(): Promise<number> {
  const [row] = await fx.db.query<{ n: number }>(
    "select count(*)::int as n from jobs where tenant_id = $1",
    [fx.tenantA.id],
  );
  return Number(row.n);
}

async function problem(res: Response, status: number) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  return JSON.parse(text);
}

Deno.test("a JSON body sent as text/plain or with no content type is a 415 and stores nothing", async () => {
  const before = await jobCount();
  for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", undefined]) {
    const res = await fx.app.request("/v1/jobs", {
      method: "POST",
      headers: { authorization: `Bearer ${fx.keyA}`, ...(type && { "content-type": type }) },
      // A Blob without a type is sent without a Content-Type header.
      body: type ? SPEC : new Blob([SPEC]),
    });
    const p = await problem(res, 415);
    assert.match(p.detail, /Content-Type must be application\/json/);
    assert.match(p.detail, type ? new RegExp(`"${type.replace(/[+.;]/g, "\\$&")}"`) : /missing/);
  }
  assert.equal(await jobCount(), before);
  for (const type of ["application/json; charset=utf-8", "Application/JSON"]) {
    const res = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      body: SPEC,
      headers: { "content-type": type },
    });
    assert.equal(res.status, 201, type);
  }
  // A POST with no body needs no content type (cancel).
  const { id } = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: SPEC })).json();
  const cancel = await fx.app.request(`/v1/jobs/${id}/cancel`, {
    method: "POST",
    headers: { authorization: `Bearer ${fx.keyA}` },
  });
  assert.equal(cancel.status, 202);
});

Deno.test("malformed JSON is a 400 that names the line, column and byte where it breaks", async () => {
  const body = '{\n  "env": {"id": "sokoban"},\n  "steps": ,\n}';
  const p = await problem(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body }), 400);
  assert.equal(
    p.detail,
    "Cannot parse the request body as it must be JSON: expected a value at line 3, column 12 (byte 41)",
  );
  assert.deepEqual(p.errors, [{
    path: "",
    code: "invalid_json",
    message: "Expected a value",
    position: { line: 3, column: 12, byte: 41 },
  }]);
  assert.equal(body.slice(41, 42), ",");
});

Deno.test("the JSON syntax locator finds the first error of each kind and accepts valid JSON", () => {
  const at = (text: string) => {
    const e = jsonSyntaxError(text);
    return e && [e.expected, e.line, e.column, e.byte];
  };
  for (const ok of ['{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\n"]}', " [] ", '"s"', "0"]) {
    assert.equal(jsonSyntaxError(ok), undefined, ok);
    JSON.parse(ok);
  }
  assert.deepEqual(at('{"a" 1}'), ["':'", 1, 6, 5]);
  assert.deepEqual(at('{"a":1,}'), ["a string key", 1, 8, 7]);
  assert.deepEqual(at('{"a":1 "b":2}'), ["',' or '}'", 1, 8, 7]);
  assert.deepEqual(at("[1,2"), ["',' or ']'", 1, 5, 4]);
  assert.deepEqual(at('{"é": tru}'), ["a value", 1, 7, 7]); // é is 2 bytes
  assert.deepEqual(at('"a\tb"'), ["an escaped control character", 1, 3, 2]);
  assert.deepEqual(at('"\\x"'), [
    'a valid escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)',
    1,
    2,
    1,
  ]);
  assert.deepEqual(at('"abc'), ["a closing quote", 1, 5, 4]);
  assert.deepEqual(at("{} {}"), ["the end of the input", 1, 4, 3]);
  assert.deepEqual(at("[".repeat(100_000)), ["a value or ']'", 1, 100_001, 100_000]);
});

Deno.test("optim.dual_clip must be greater than 1, as documented", async () => {
  const before = await jobCount();
  for (const dual_clip of [1, 0.5]) {
    const json = { env: { id: "sokoban" }, optim: { dual_clip } };
    const p = await problem(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json }), 400);
    assert.equal(p.errors[0].path, "optim.dual_clip");
    assert.equal(p.errors[0].code, "too_small");
  }
  assert.equal(await jobCount(), before);
  const json = { env: { id: "sokoban" }, optim: { dual_clip: 1.01 } };
  assert.equal((await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json })).status, 201);
  const reference = await Deno.readTextFile(new URL("../../jobs/SPEC.md", import.meta.url));
  assert.match(reference, /\| `optim\.dual_clip` +\| number +\| `3` +\| > 1, ≤ 100 /);
});

Deno.test("a retired seed field is a 400 naming it and stores nothing; a stored spec that holds one still parses", async () => {
  for (const field of RETIRED_SEED_FIELDS) {
    const before = await jobCount();
    const body = JSON.stringify({ env: { id: "sokoban" }, seed: { [field]: false } });
    const p = await problem(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body }), 400);
    assert.ok(
      p.errors.some((e: { path: string; message: string }) =>
        `${e.path} ${e.message}`.includes(field)
      ),
      JSON.stringify(p.errors),
    );
    assert.equal(await jobCount(), before);
  }
  // A job stored before the fields were retired (its spec the defaulted output of that release)
  const stored = { ...parseJobSpec({ env: { id: "sokoban" } }) } as Record<string, unknown>;
  stored.seed = {
    ...(stored.seed as object),
    analyzer_constrained: true,
    analyzer_summary: true,
    skill_grammar: "env",
    analyzer_feedback: true,
    analyzer_replay_samples: 8,
    analyzer_replay_coef: 0.5,
  };
  assert.throws(() => parseJobSpec(stored), /analyzer_replay_samples/);
  assert.deepEqual(parseStoredJobSpec(stored), parseJobSpec({ env: { id: "sokoban" } }));
});

Deno.test("warmup.policy.corrective_share is a 400 naming experimental.corrective_share and stores nothing", async () => {
  const before = await jobCount();
  const body = JSON.stringify({
    env: { id: "sokoban" },
    warmup: { policy: { corrective_share: 0.25 } },
  });
  const p = await problem(await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body }), 400);
  // The exact old field, not its object (`warmup.policy`), with the new one named.
  assert.deepEqual(p.errors.map((e: { path: string }) => e.path), [
    "warmup.policy.corrective_share",
  ]);
  assert.match(
    p.errors[0].message,
    /^Cannot use warmup\.policy\.corrective_share as it moved to experimental\.corrective_share/,
  );
  assert.match(p.detail, /at `warmup\.policy\.corrective_share`/);
  // Beside another unknown key of the same object: each named where it is.
  const both = JSON.stringify({
    env: { id: "sokoban" },
    warmup: { policy: { corrective_share: 0.25, bogus: 1 } },
    optim: { clip_ratio: 0.2 },
  });
  const p2 = await problem(
    await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: both }),
    400,
  );
  const byPath = new Map<string, string>(
    p2.errors.map((e: { path: string; message: string }) => [e.path, e.message]),
  );
  assert.deepEqual([...byPath.keys()].sort(), [
    "optim.clip_ratio",
    "warmup.policy",
    "warmup.policy.corrective_share",
  ]);
  assert.match(byPath.get("warmup.policy.corrective_share")!, /experimental\.corrective_share/);
  assert.match(byPath.get("warmup.policy")!, /"bogus"/);
  assert.doesNotMatch(byPath.get("warmup.policy")!, /corrective_share/);
  assert.match(byPath.get("optim.clip_ratio")!, /clip_ratio_low and optim\.clip_ratio_high/);
  assert.equal(await jobCount(), before);
  const moved = JSON.stringify({
    env: { id: "sokoban" },
    experimental: { corrective_share: 0.25 },
  });
  const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: moved });
  assert.equal(res.status, 201, await res.clone().text());
  assert.equal((await res.json()).spec.experimental.corrective_share, 0.25);
});

Deno.test("a known path asked with another method is a 405 with Allow", async () => {
  const { id } = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: SPEC })).json();
  const cases: [string, string, string][] = [
    ["PUT", `/v1/jobs/${id}`, "DELETE, GET, HEAD"],
    ["PATCH", `/v1/jobs/${id}`, "DELETE, GET, HEAD"],
    ["DELETE", "/v1/jobs", "GET, HEAD, POST"],
    ["GET", `/v1/jobs/${id}/cancel`, "POST"],
    ["POST", `/v1/jobs/${id}/events`, "GET, HEAD"],
    ["POST", `/v1/jobs/${id}/checkpoints/1/files/merged/config.json`, "GET, HEAD"],
    ["POST", "/healthz", "GET, HEAD"],
  ];
  for (const [method, path, allow] of cases) {
    const res = await req(fx.app, method, path, { key: fx.keyA });
    const p = await problem(res, 405);
    assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
    assert.equal(p.type, "https://seed.dev/problems/method-not-allowed");
  }
  await problem(await req(fx.app, "GET", `/v1/jobs/${id}/nothing`, { key: fx.keyA }), 404);
});

Deno.test("a path with a trailing slash is answered as the path without it, through a real server", async () => {
  const { id } = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, body: SPEC })).json();
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, fx.app.fetch);
  const base = `http://127.0.0.1:${server.addr.port}`;
  const auth = { authorization: `Bearer ${fx.keyA}` };
  try {
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: auth });
      return { status: res.status, text: await res.text() };
    };
    for (const path of ["/v1/jobs", `/v1/jobs/${id}`, `/v1/jobs/${id}/checkpoints`]) {
      const plain = await get(path);
      assert.equal(plain.status, 200, `${path}: ${plain.text}`);
      const slashed = await get(`${path}/`);
      assert.equal(slashed.status, 200, `${path}/: ${slashed.text}`);
      assert.deepEqual(Object.keys(JSON.parse(slashed.text)), Object.keys(JSON.parse(plain.text)));
    }
    assert.equal(JSON.parse((await get(`/v1/jobs/${id}/`)).text).id, id);
    // Another method on it is still a 405 whose Allow lists what the path takes.
    const put = await fetch(`${base}/v1/jobs/${id}/`, { method: "PUT", headers: auth });
    await problem(put, 405);
    assert.equal(put.headers.get("allow"), "DELETE, GET, HEAD");
    // Two slashes name no route.
    await problem(await fetch(`${base}/v1/jobs/${id}//`, { headers: auth }), 404);
  } finally {
    await server.shutdown();
  }
});

Deno.test("over-long targets and headers get problem+json through a real server", async () => {
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, fx.app.fetch);
  const base = `http://127.0.0.1:${server.addr.port}`;
  const auth = { authorization: `Bearer ${fx.keyA}` };
  try {
    const long = await fetch(`${base}/v1/jobs?cursor=${"a".repeat(MAX_TARGET_CHARS)}`, {
      headers: auth,
    });
    const p414 = await problem(long, 414);
    assert.match(p414.detail, new RegExp(`at most ${MAX_TARGET_CHARS} characters`));
    const big = await fetch(`${base}/v1/jobs`, {
      headers: { ...auth, "x-big": "a".repeat(MAX_HEADER_BYTES) },
    });
    assert.match((await problem(big, 431)).detail, /headers must be at most/);
    const many = Object.fromEntries(
      Array.from({ length: MAX_HEADERS + 1 }, (_, i) => [`x-h${i}`, "1"]),
    );
    const manyRes = await fetch(`${base}/v1/jobs`, { headers: { ...auth, ...many } });
    assert.match((await problem(manyRes, 431)).detail, /at most 64 header fields/);
    const plain = await fetch(`${base}/v1/jobs`, { headers: auth });
    await plain.body?.cancel();
    assert.equal(plain.status, 200);
  } finally {
    await server.shutdown();
  }
});

Deno.test({
  name: "strict input tests close their fixture",
  fn: async () => await fx.close(),
});
