/**
 * `/v1/secrets` and the annotator fields of a JobSpec through the API on real Postgres: values
 * stored encrypted and never returned by any answer (PUT, GET, job GET, events, errors), tenant
 * isolation, and submit-time 422s naming `warmup.analyzer.annotator.credential_secret` (unknown
 * secret) and `…base_url` (loopback without the operator's `SEED_ANNOTATOR_ALLOWED_HOSTS`).
 */
import assert from "node:assert/strict";
import { readSecretValue, SecretCipher, SecretKeyError } from "../../jobs/mod.ts";
import { type ApiFixture, req, startApiFixture } from "./_fixture.ts";

const KEY_HEX = "0f".repeat(32);
const cipher = new SecretCipher(KEY_HEX);
const fx: ApiFixture = await startApiFixture({ secretCipher: cipher });
const VALUE = "sk-live-9d2e4b7a1c0f";

/** Runs `fn` with `SEED_ANNOTATOR_ALLOWED_HOSTS` set to `value` (undefined: unset). */
async function withAllowed<T>(value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const before = Deno.env.get("SEED_ANNOTATOR_ALLOWED_HOSTS");
  if (value === undefined) Deno.env.delete("SEED_ANNOTATOR_ALLOWED_HOSTS");
  else Deno.env.set("SEED_ANNOTATOR_ALLOWED_HOSTS", value);
  try {
    return await fn();
  } finally {
    if (before === undefined) Deno.env.delete("SEED_ANNOTATOR_ALLOWED_HOSTS");
    else Deno.env.set("SEED_ANNOTATOR_ALLOWED_HOSTS", before);
  }
}

function annotatorJob(annotator: Record<string, unknown>) {
  return {
    env: { id: "sokoban" },
    warmup: {
      analyzer: {
        annotator: {
          base_url: "https://api.openai.com/v1",
          model: "gpt-4.1",
          credential_secret: "openai",
          ...annotator,
        },
      },
    },
  };
}

Deno.test("a secret is stored encrypted and no answer carries its value", async () => {
  const put = await req(fx.app, "PUT", "/v1/secrets/openai", {
    key: fx.keyA,
    json: { value: VALUE },
  });
  assert.equal(put.status, 201);
  const putText = await put.text();
  assert.ok(!putText.includes(VALUE));
  assert.deepEqual(Object.keys(JSON.parse(putText)).sort(), ["created_at", "name", "updated_at"]);

  const again = await req(fx.app, "PUT", "/v1/secrets/openai", {
    key: fx.keyA,
    json: { value: `${VALUE}-2` },
  });
  assert.equal(again.status, 200, "a second PUT replaces the value");
  assert.ok(!(await again.text()).includes(VALUE));

  const list = await req(fx.app, "GET", "/v1/secrets", { key: fx.keyA });
  const listText = await list.text();
  assert.ok(!listText.includes(VALUE));
  assert.deepEqual(JSON.parse(listText).secrets.map((s: { name: string }) => s.name), ["openai"]);
  const one = await req(fx.app, "GET", "/v1/secrets/openai", { key: fx.keyA });
  assert.equal(one.status, 200);
  assert.ok(!(await one.text()).includes(VALUE));

  const [row] = await fx.db.query<{ nonce: string; ciphertext: string }>(
    "select nonce, ciphertext from tenant_secrets where tenant_id = $1::uuid and name = 'openai'",
    [fx.tenantA.id],
  );
  assert.ok(!row.ciphertext.includes(VALUE) && !atob(row.ciphertext).includes(VALUE));
  assert.equal(await readSecretValue(fx.db, cipher, fx.tenantA.id, "openai"), `${VALUE}-2`);
  await assert.rejects(
    readSecretValue(fx.db, new SecretCipher("1e".repeat(32)), fx.tenantA.id, "openai"),
    SecretKeyError,
  );
  // The row copied to tenant B does not decrypt there (tenant and name are associated data).
  await fx.db.query(
    "insert into tenant_secrets (tenant_id, name, nonce, ciphertext) values ($1::uuid, 'openai', $2, $3)",
    [fx.tenantB.id, row.nonce, row.ciphertext],
  );
  await assert.rejects(readSecretValue(fx.db, cipher, fx.tenantB.id, "openai"), SecretKeyError);
  await fx.db.query("delete from tenant_secrets where tenant_id = $1::uuid", [fx.tenantB.id]);
});

Deno.test("another tenant neither sees nor deletes a secret", async () => {
  const list = await (await req(fx.app, "GET", "/v1/secrets", { key: fx.keyB })).json();
  assert.deepEqual(list.secrets, []);
  assert.equal((await req(fx.app, "GET", "/v1/secrets/openai", { key: fx.keyB })).status, 404);
  assert.equal((await req(fx.app, "DELETE", "/v1/secrets/openai", { key: fx.keyB })).status, 404);
  assert.equal((await req(fx.app, "GET", "/v1/secrets/openai", { key: fx.keyA })).status, 200);
});

Deno.test("bad names and values are 400s naming the field, without echoing the value", async () => {
  const badName = await req(fx.app, "PUT", "/v1/secrets/Bad%20Name", {
    key: fx.keyA,
    json: { value: VALUE },
  });
  assert.equal(badName.status, 400);
  assert.equal((await badName.json()).errors[0].path, "name");
  const empty = await req(fx.app, "PUT", "/v1/secrets/x", { key: fx.keyA, json: { value: "" } });
  assert.equal(empty.status, 400);
  assert.equal((await empty.json()).errors[0].path, "value");
  const big = `${VALUE}${"z".repeat(9000)}`;
  const tooBig = await req(fx.app, "PUT", "/v1/secrets/x", { key: fx.keyA, json: { value: big } });
  assert.equal(tooBig.status, 400);
  const text = await tooBig.text();
  assert.equal(JSON.parse(text).errors[0].path, "value");
  assert.ok(!text.includes(VALUE));
  assert.equal((await req(fx.app, "GET", "/v1/secrets/x", { key: fx.keyA })).status, 404);
});

Deno.test("a job naming an unknown secret or a loopback annotator is a 422 naming the field", async () => {
  await withAllowed(undefined, async () => {
    const unknown = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyB,
      json: annotatorJob({}),
    });
    assert.equal(unknown.status, 422);
    assert.deepEqual((await unknown.json()).errors.map((e: { path: string }) => e.path), [
      "warmup.analyzer.annotator.credential_secret",
    ]);
    const loopback = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: annotatorJob({ base_url: "http://127.0.0.1:8000/v1" }),
    });
    assert.equal(loopback.status, 422);
    const body = await loopback.json();
    assert.equal(body.errors[0].path, "warmup.analyzer.annotator.base_url");
    assert.match(body.detail, /SEED_ANNOTATOR_ALLOWED_HOSTS/);
  });
  const notUrl = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: annotatorJob({ base_url: "not a url" }),
  });
  assert.equal(notUrl.status, 400);
  assert.equal((await notUrl.json()).errors[0].path, "warmup.analyzer.annotator.base_url");
});

Deno.test("an accepted annotator job shows the secret's name, never its value", async () => {
  const res = await withAllowed("127.0.0.1", () =>
    req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: annotatorJob({ base_url: "http://127.0.0.1:8000/v1" }),
    }));
  assert.equal(res.status, 201);
  const job = await res.json();
  assert.equal(job.spec.warmup.analyzer.annotator.credential_secret, "openai");
  assert.equal(job.spec.warmup.analyzer.annotator.concurrency, 4);
  for (const path of [`/v1/jobs/${job.id}`, `/v1/jobs/${job.id}/events`, "/v1/jobs"]) {
    const text = await (await req(fx.app, "GET", path, { key: fx.keyA })).text();
    assert.ok(text.includes("openai") || path.endsWith("events"), path);
    assert.ok(!text.includes(VALUE), path);
  }
});

Deno.test("a secret in use is kept; deleted, it is gone and new jobs naming it are refused", async () => {
  // The job accepted above is still queued: it keeps the secret.
  const busy = await req(fx.app, "DELETE", "/v1/secrets/openai", { key: fx.keyA });
  assert.equal(busy.status, 409);
  const detail = (await busy.json()).detail;
  assert.match(detail, /credential_secret/);
  assert.match(
    detail,
    /wait for it to end, or cancel it first with `seed cancel [0-9a-f-]{36}` or `POST /,
  );
  const queued = await fx.db.query<{ id: string }>(
    "select id from jobs where tenant_id = $1::uuid and status = 'queued'",
    [fx.tenantA.id],
  );
  for (const { id } of queued) {
    assert.equal(
      (await req(fx.app, "POST", `/v1/jobs/${id}/cancel`, { key: fx.keyA })).status,
      202,
    );
  }
  assert.equal((await req(fx.app, "DELETE", "/v1/secrets/openai", { key: fx.keyA })).status, 204);
  assert.equal((await req(fx.app, "GET", "/v1/secrets/openai", { key: fx.keyA })).status, 404);
  const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: annotatorJob({}) });
  assert.equal(res.status, 422);
});

Deno.test("rollout.engine endpoints follow the annotator's URL and secret rules, 422s naming the endpoint's field", async () => {
  const job = (endpoint: Record<string, unknown>) => ({
    env: { id: "sokoban" },
    rollout: {
      engine: {
        endpoints: [
          { base_url: "https://vllm.example.com", model: "policy" },
          { base_url: "https://vllm2.example.com", model: "policy", ...endpoint },
        ],
      },
    },
  });
  await withAllowed(undefined, async () => {
    const loopback = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyB,
      json: job({ base_url: "http://127.0.0.1:8788", api_key_secret: "nope" }),
    });
    assert.equal(loopback.status, 422);
    assert.deepEqual((await loopback.json()).errors.map((e: { path: string }) => e.path), [
      "rollout.engine.endpoints[1].base_url",
      "rollout.engine.endpoints[1].api_key_secret",
    ]);
  });
  const put = await req(fx.app, "PUT", "/v1/secrets/serve-key", {
    key: fx.keyB,
    json: { value: "k-1" },
  });
  assert.equal(put.status, 201);
  await withAllowed("127.0.0.1:8788", async () => {
    const listed = await req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyB,
      json: job({ base_url: "http://127.0.0.1:8788", api_key_secret: "serve-key" }),
    });
    assert.equal(listed.status, 201, await listed.text());
  });
  // the queued job keeps the secret it names
  const busy = await req(fx.app, "DELETE", "/v1/secrets/serve-key", { key: fx.keyB });
  assert.equal(busy.status, 409);
  assert.match((await busy.json()).detail, /api_key_secret/);
  const bad = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyB,
    json: job({ base_url: "not a url" }),
  });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).errors[0].path, "rollout.engine.endpoints[1].base_url");
});

Deno.test("a base_url written with whitespace at its ends, another scheme, credentials or a host parsing would change is a 400 naming the field at every outbound URL, and nothing is queued", async () => {
  const engineJob = (base_url: string) => ({
    env: { id: "sokoban" },
    rollout: { engine: { endpoints: [{ base_url, model: "policy" }] } },
  });
  const count = async () =>
    (await fx.db.query<{ n: number }>(
      "select count(*)::int as n from jobs where tenant_id = $1::uuid",
      [fx.tenantA.id],
    ))[0].n;
  const before = await count();
  const cases: [string, RegExp][] = [
    [" https://vllm.example.com", /whitespace/],
    ["https://vllm.example.com ", /whitespace/],
    ["https://vllm.example.com\n", /whitespace/],
    ["https://vllm.exam\tple.com", /control characters/],
    ["ftp://vllm.example.com", /scheme must be http or https/],
    ["file:///etc/passwd", /scheme must be http or https/],
    ["https://user:pw@vllm.example.com", /credentials/],
    // An empty credentials part, which parsing drops silently.
    ["https://@vllm.example.com/", /credentials \(a user:password@ part, even an empty one\)/],
    ["https://:@vllm.example.com/", /credentials/],
    // Parsed as https://vllm.example.com/ though no // was written.
    ["https:vllm.example.com", /must start with https:\/\/ and then the host/],
    // Hosts that parsing changes: a soft hyphen dropped, fullwidth letters folded, %-decoded.
    [
      "https://vllm.exam\u00adple.com/v1",
      /turns "vllm\.exam\\u\{ad\}ple\.com" into vllm\.example\.com/,
    ],
    ["https://\uff56llm.example.com/v1", /host must be written as it is contacted/],
    ["https://%76llm.example.com/v1", /host must be written as it is contacted/],
    // Refused by parsing, with the reason.
    ["http://[fe80::1%25eth0]/v1", /zone id/],
    ["http://vllm example.com/v1", /host must not hold spaces/],
  ];
  // Whatever the operator allows, these are mistakes in the text: the same 400 on every deployment.
  for (const allowed of [undefined, "vllm.example.com,127.0.0.1"]) {
    await withAllowed(allowed, async () => {
      for (const [url, reason] of cases) {
        for (
          const [spec, field] of [
            [engineJob(url), "rollout.engine.endpoints[0].base_url"],
            [annotatorJob({ base_url: url }), "warmup.analyzer.annotator.base_url"],
          ] as const
        ) {
          const res = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
          const text = await res.text();
          assert.equal(res.status, 400, `${JSON.stringify(url)} at ${field}: ${text}`);
          const body = JSON.parse(text);
          assert.equal(body.errors[0].path, field);
          assert.match(body.errors[0].message, reason);
          assert.ok(!text.includes("pw@"), "the password is not echoed");
        }
      }
    });
  }
  assert.equal(await count(), before);
});

Deno.test("rollout.engine endpoints with an environment that renders images are refused at submit, naming rollout.engine and the environment; nothing is queued", async () => {
  const spec = (options: Record<string, unknown>) => ({
    env: { id: "sokoban", options },
    model: { base: "builtin:tiny-vl" },
    rollout: {
      engine: { endpoints: [{ base_url: "https://vllm.example.com", model: "policy" }] },
    },
  });
  const before =
    (await (await req(fx.app, "GET", "/v1/jobs?limit=100", { key: fx.keyB })).json()).jobs
      .length;
  const res = await req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyB,
    json: spec({ render: "image" }),
  });
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.deepEqual(body.errors.map((e: { path: string }) => e.path), ["rollout.engine"]);
  assert.match(body.detail, /rollout\.engine.*sokoban renders images/);
  const after =
    (await (await req(fx.app, "GET", "/v1/jobs?limit=100", { key: fx.keyB })).json()).jobs
      .length;
  assert.equal(after, before);
  // text observations of the same environment are fine
  const text = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyB, json: spec({}) });
  assert.equal(text.status, 201, await text.text());
});

Deno.test("close the fixture", async () => {
  await fx.close();
});
