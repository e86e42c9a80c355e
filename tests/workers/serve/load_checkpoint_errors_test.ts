/**
 * `POST /v1/load_checkpoint` and `/v1/load_lora_adapter` on bad input, over real HTTP with the
 * real S3 server: a folder without config.json is a 400 at `checkpoint_path`, a folder whose files
 * are deleted between its listing and its reads (a job deleted while loading) a 404 at
 * `checkpoint_path`, and a name the server resolves itself (`job:…`, `model:…`, `builtin:…`) or
 * one with control characters a 400 at `model_name` / `lora_name`.
 */
import assert from "node:assert/strict";
import { startServer } from "../../../workers/serve/main.ts";
import { startServeFixture } from "./_fixture.ts";

const f = await startServeFixture();
const server = startServer({ db: f.db, store: f.s3.store, SERVE_PORT: 0, authCacheMs: 0 });
const url = `http://127.0.0.1:${server.port}`;
const store = f.s3.store;
const tenantPrefix = `tenants/${f.tenantA.id}/`;
const s3Path = (prefix: string) => `s3://${store.bucket}/${prefix}`;

async function post(path: string, body: unknown) {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${f.keyA}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, error: res.ok ? null : JSON.parse(text).error };
}

Deno.test("a folder with files but no config.json is a 400 at checkpoint_path", async () => {
  const prefix = `${tenantPrefix}jobs/${crypto.randomUUID()}/checkpoints/`;
  await store.put(`${prefix}step-1/model.safetensors`, new Uint8Array([1, 2, 3]));
  for (const at of [prefix, `${prefix}step-1/`]) {
    const res = await post("/v1/load_checkpoint", { model_name: "m", checkpoint_path: s3Path(at) });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.error.param, "checkpoint_path");
    assert.equal(res.error.type, "invalid_request_error");
    assert.match(res.error.message, /config\.json must exist/);
  }
});

Deno.test("files deleted between the folder's listing and its reads are a 404 at checkpoint_path", async () => {
  const prefix = `${tenantPrefix}jobs/${crypto.randomUUID()}/checkpoints/step-1/`;
  await store.put(`${prefix}config.json`, new TextEncoder().encode("{}"));
  await store.put(`${prefix}model.safetensors`, new Uint8Array([1, 2, 3]));
  // The job is deleted right after the server listed the folder: its reads find nothing.
  const list = store.list;
  store.list = async (p: string) => {
    const keys = await list.call(store, p);
    for (const key of keys) await store.delete(key);
    return keys;
  };
  try {
    const res = await post("/v1/load_checkpoint", {
      model_name: "gone",
      checkpoint_path: s3Path(prefix),
    });
    assert.equal(res.status, 404, res.text);
    assert.equal(res.error.param, "checkpoint_path");
    assert.equal(res.error.code, "checkpoint_not_found");
    assert.match(res.error.message, /config\.json no longer exists/);
    assert.deepEqual(await list.call(store, prefix), []);
  } finally {
    store.list = list;
  }
});

Deno.test("reserved and control-character model names are a 400 at model_name or lora_name", async () => {
  const prefix = `${tenantPrefix}jobs/${crypto.randomUUID()}/checkpoints/step-1/`;
  await store.put(`${prefix}config.json`, new TextEncoder().encode("{}"));
  const names = [
    `job:${crypto.randomUUID()}@1`,
    `job:${crypto.randomUUID()}`,
    `model:${crypto.randomUUID()}`,
    "builtin:tiny",
    "a\nb",
    "a\u0085b",
    "a\u202eb",
    "JOB:x",
    "Model:x",
    "BUILTIN:tiny",
    " job:x",
    "\u00a0x",
    "x ",
  ];
  for (const name of names) {
    const res = await post("/v1/load_checkpoint", {
      model_name: name,
      checkpoint_path: s3Path(prefix),
    });
    assert.equal(res.status, 400, `${JSON.stringify(name)}: ${res.text}`);
    assert.equal(res.error.param, "model_name");
    const lora = await post("/v1/load_lora_adapter", {
      lora_name: name,
      lora_path: s3Path(prefix),
    });
    assert.equal(lora.status, 400, `${JSON.stringify(name)}: ${lora.text}`);
    assert.equal(lora.error.param, "lora_name");
  }
  const reserved = await post("/v1/load_checkpoint", {
    model_name: "job:x",
    checkpoint_path: s3Path(prefix),
  });
  assert.match(reserved.error.message, /must not start with job:, model:, builtin:/);
  const upper = await post("/v1/load_checkpoint", {
    model_name: "JOB:x",
    checkpoint_path: s3Path(prefix),
  });
  assert.match(upper.error.message, /must not start with job:, model:, builtin: in any case/);
  const spaced = await post("/v1/load_checkpoint", {
    model_name: " job:x",
    checkpoint_path: s3Path(prefix),
  });
  assert.match(spaced.error.message, /must not start or end with whitespace/);
});

Deno.test("stop the load_checkpoint error test server and fixture", async () => {
  await server.stop();
  await f.close();
});
