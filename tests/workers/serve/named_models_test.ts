/**
 * Models loaded by name (`/v1/load_checkpoint`, `/v1/load_lora_adapter`) as a user of the server
 * meets them, over real HTTP with the real S3 server and the official `openai` client: they are
 * listed by `GET /v1/models` in OpenAI's shape, and a name loaded from a job's checkpoint goes
 * away when the job is deleted through the job API (`DELETE /v1/jobs/{id}`).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createApp } from "../../../api/app.ts";
import { getCheckpoint } from "../../../jobs/mod.ts";
import {
  configFromJson,
  type LoraConfig,
  loraParameterSpecs,
  readSafetensors,
  saveAdapter,
  writeSafetensors,
} from "../../../workers/model/mod.ts";
import { policyPublisher, storeUpload } from "../../../workers/seed/run/publish_policy.ts";
import { startServer } from "../../../workers/serve/main.ts";
import { tinySokobanPolicy } from "../seed/_jobs.ts";
import { jobWithCheckpoints, startServeFixture } from "./_fixture.ts";

const f = await startServeFixture();
const server = startServer({ db: f.db, store: f.s3.store, SERVE_PORT: 0, authCacheMs: 0 });
const url = `http://127.0.0.1:${server.port}`;
const { model, policy } = await tinySokobanPolicy();
await policy.release();

async function post(path: string, body: unknown, key = f.keyA) {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, error: res.ok ? null : JSON.parse(text).error };
}

/** Publishes the tiny policy as job `jobId`'s version 0; its folder's `s3://` path. */
async function published(jobId: string): Promise<string> {
  const publish = policyPublisher({
    upload: storeUpload(f.s3.store, { tenantId: f.tenantA.id, jobId, attempt: 1 }),
    model,
  });
  return (await publish(0)).path;
}

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });

Deno.test("models loaded by name are listed by GET /v1/models in OpenAI's shape, to their tenant only", async () => {
  const at = await published(crypto.randomUUID());
  const before = Date.now();
  for (const name of ["policy-v0", "org/policy"]) {
    const res = await post("/v1/load_checkpoint", { model_name: name, checkpoint_path: at });
    assert.equal(res.status, 200, res.text);
  }
  const listed = [];
  for await (const m of client(f.keyA).models.list()) listed.push(m);
  const named = listed.filter((m) => !/^(job|model):/.test(m.id));
  assert.deepEqual(named.map((m) => m.id), ["policy-v0", "org/policy"]);
  for (const m of named) {
    assert.deepEqual(Object.keys(m).sort(), ["created", "id", "object", "owned_by"]);
    assert.equal(m.object, "model");
    assert.equal(m.owned_by, f.tenantA.name);
    assert.ok(Number.isInteger(m.created));
    assert.ok(Math.abs(m.created * 1000 - before) < 60_000, `created ${m.created}`);
  }
  const one = await client(f.keyA).models.retrieve("policy-v0");
  assert.deepEqual(one, named[0]);
  // A name with a slash (as Hugging Face names are) is found whether the slash comes escaped
  // (the openai client sends org%2Fpolicy) or as it is (curl …/v1/models/org/policy).
  assert.deepEqual(await client(f.keyA).models.retrieve("org/policy"), named[1]);
  const raw = await fetch(`${url}/v1/models/org/policy`, {
    headers: { authorization: `Bearer ${f.keyA}` },
  });
  assert.equal(raw.status, 200);
  assert.deepEqual(await raw.json(), named[1]);
  // Another tenant sees none of them.
  const other = [];
  for await (const m of client(f.keyB).models.list()) other.push(m.id);
  assert.deepEqual(other.filter((id) => id.includes("policy")), []);
  await assert.rejects(
    client(f.keyB).models.retrieve("policy-v0"),
    (e: unknown) => e instanceof OpenAI.APIError && e.status === 404,
  );
  // Unloaded, a name leaves the list.
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "policy-v0" })).status, 200);
  const after = [];
  for await (const m of client(f.keyA).models.list()) after.push(m.id);
  assert.deepEqual(after.filter((id) => id.includes("policy")), ["org/policy"]);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "org/policy" })).status, 200);
});

Deno.test("a name loaded from a job's checkpoint is unloaded once the job is deleted; a folder no job owns keeps its name", async () => {
  const jobId = await jobWithCheckpoints(f, f.tenantA, { steps: [1] });
  const ck = (await getCheckpoint(f.db, jobId, 1))!;
  const configKey = ck.files.find((x) => x.name === "config.json")!.key;
  const folder = `s3://${f.s3.store.bucket}/${configKey.slice(0, -"config.json".length)}`;
  let res = await post("/v1/load_checkpoint", { model_name: "from-job", checkpoint_path: folder });
  assert.equal(res.status, 200, res.text);
  res = await post("/v1/load_checkpoint", {
    model_name: "unowned",
    checkpoint_path: await published(crypto.randomUUID()),
  });
  assert.equal(res.status, 200, res.text);
  const complete = (name: string) =>
    post("/v1/completions", { model: name, prompt: [1, 2, 3], max_tokens: 1 });
  assert.equal((await complete("from-job")).status, 200);

  const api = createApp({ db: f.db, store: f.s3.store, authCacheMs: 0 });
  const del = await api.request(`/v1/jobs/${jobId}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${f.keyA}` },
  });
  assert.equal(del.status, 204, await del.text());

  const ids = [];
  for await (const m of client(f.keyA).models.list()) ids.push(m.id);
  assert.ok(!ids.includes("from-job"), ids.join(", "));
  assert.ok(ids.includes("unowned"), ids.join(", "));
  assert.ok(!ids.some((id) => id.includes(jobId)), "nor its job: names");
  res = await complete("from-job");
  assert.equal(res.status, 404, res.text);
  assert.equal(res.error.code, "model_not_found");
  assert.equal(res.error.param, "model");
  assert.match(
    res.error.message,
    new RegExp(`job it was loaded from \\(${jobId}\\) has been deleted`),
  );
  // Later requests, and GET /v1/models/{name}, say the same.
  const retrieve = async (name: string, key = f.keyA) => {
    const got = await fetch(`${url}/v1/models/${encodeURIComponent(name)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    return { status: got.status, error: (await got.json()).error };
  };
  for (const again of [await complete("from-job"), await retrieve("from-job")]) {
    assert.equal(again.status, 404);
    assert.equal(again.error.code, "model_not_found");
    assert.equal(again.error.message, res.error.message);
  }
  // The other tenant's request for that name is a plain 404 (it never had it), which names
  // the names load_checkpoint gives too.
  const other = await post(
    "/v1/completions",
    { model: "from-job", prompt: [1], max_tokens: 1 },
    f.keyB,
  );
  assert.equal(other.status, 404);
  assert.doesNotMatch(other.error.message, /deleted/);
  assert.match(other.error.message, /load_checkpoint/);
  const otherGet = await retrieve("from-job", f.keyB);
  assert.equal(otherGet.status, 404);
  assert.equal(otherGet.error.message, other.error.message);
  // The deleted folder cannot be loaded again.
  res = await post("/v1/load_checkpoint", { model_name: "from-job", checkpoint_path: folder });
  assert.equal(res.status, 400, res.text);
  assert.equal(res.error.param, "checkpoint_path");
  assert.equal((await complete("unowned")).status, 200);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "unowned" })).status, 200);
});

Deno.test("malformed files and bodies of load_lora_adapter and load_checkpoint are 400s naming the file or field, and nothing is loaded", async () => {
  const store = f.s3.store;
  const base = await published(crypto.randomUUID());
  let res = await post("/v1/load_checkpoint", { model_name: "base", checkpoint_path: base });
  assert.equal(res.status, 200, res.text);
  const baseKeys = await store.list(base.slice(`s3://${store.bucket}/`.length));
  /** A folder with the base's files, `replace` written over them; its `s3://` path. */
  const folder = async (replace: Record<string, string | Uint8Array>, from = baseKeys) => {
    const prefix = `tenants/${f.tenantA.id}/broken/${crypto.randomUUID()}/`;
    for (const key of from) {
      const name = key.split("/").at(-1)!;
      if (!(name in replace)) await store.put(prefix + name, await store.get(key));
    }
    for (const [name, body] of Object.entries(replace)) {
      await store.put(
        prefix + name,
        typeof body === "string" ? new TextEncoder().encode(body) : body,
      );
    }
    return `s3://${store.bucket}/${prefix}`;
  };
  const garbage = new Uint8Array([9, 0, 0, 0, 0, 0, 0, 0, 123, 125, 1]);
  const goodConfig = JSON.stringify({
    peft_type: "LORA",
    r: 4,
    lora_alpha: 8,
    target_modules: ["q_proj", "v_proj"],
    base_model_name_or_path: "base",
  });
  const adapters: [string, Record<string, string | Uint8Array>, RegExp][] = [
    [
      "not JSON",
      { "adapter_config.json": "{not json", "adapter_model.safetensors": garbage },
      /adapter_config\.json must be a JSON object/,
    ],
    [
      "null",
      { "adapter_config.json": "null", "adapter_model.safetensors": garbage },
      /adapter_config\.json must be a JSON object/,
    ],
    [
      "a list",
      { "adapter_config.json": "[1]", "adapter_model.safetensors": garbage },
      /adapter_config\.json must be a JSON object/,
    ],
    [
      "no target_modules",
      {
        "adapter_config.json": '{"peft_type":"LORA","r":4,"base_model_name_or_path":"base"}',
        "adapter_model.safetensors": garbage,
      },
      /adapter_config\.json as it must hold peft_type, r, lora_alpha, target_modules: it lacks lora_alpha, target_modules$/,
    ],
    [
      "an empty object",
      {
        "adapter_config.json": "{}",
        "adapter_model.safetensors": garbage,
      },
      /adapter_config\.json as it must hold .*: it lacks peft_type, r, lora_alpha, target_modules$/,
    ],
    ["lora_alpha null (a scale of 0 if read as 0)", {
      "adapter_config.json": goodConfig.replace('"lora_alpha":8', '"lora_alpha":null'),
      "adapter_model.safetensors": garbage,
    }, /adapter_config\.json as lora_alpha must be a number .*: current value is null/],
    ["a rank written as a string", {
      "adapter_config.json": goodConfig.replace('"r":4', '"r":"4"'),
      "adapter_model.safetensors": garbage,
    }, /adapter_config\.json as r must be a number .*: current value is "4"/],
    ["a base name that is no string", {
      "adapter_config.json": goodConfig.replace(
        '"base_model_name_or_path":"base"',
        '"base_model_name_or_path":{"a":1}',
      ),
      "adapter_model.safetensors": garbage,
    }, /adapter_config\.json as base_model_name_or_path must be a string/],
    ["a rank that is no number", {
      "adapter_config.json": goodConfig.replace('"r":4', '"r":"four"'),
      "adapter_model.safetensors": garbage,
    }, /adapter_config\.json/],
    ["weights that are no safetensors", {
      "adapter_config.json": goodConfig,
      "adapter_model.safetensors": garbage,
    }, /adapter_model\.safetensors/],
  ];
  for (const [what, files, message] of adapters) {
    for (const baseName of ["base", undefined]) {
      res = await post("/v1/load_lora_adapter", {
        lora_name: "bad-adapter",
        lora_path: await folder(files, []),
        ...(baseName ? { base_model_name: baseName } : {}),
      });
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.equal(res.error.type, "invalid_request_error", what);
      assert.equal(res.error.param, "lora_path", what);
      assert.match(res.error.message, message, `${what}: ${res.error.message}`);
    }
  }
  const baseConfig = JSON.parse(
    new TextDecoder().decode(await store.get(baseKeys.find((k) => k.endsWith("/config.json"))!)),
  );
  const checkpoints: [string, Record<string, string | Uint8Array>, RegExp][] = [
    ["config.json not JSON", { "config.json": "{" }, /config\.json/],
    ["weights that are no safetensors", { "model.safetensors": garbage }, /model\.safetensors/],
    ["tokenizer.json not JSON", { "tokenizer.json": "{" }, /tokenizer\.json/],
    ["tokenizer.json an empty object", { "tokenizer.json": "{}" }, /tokenizer\.json/],
    [
      "an eos_token_id written as a string",
      { "generation_config.json": '{"eos_token_id":"29"}' },
      /generation_config\.json as eos_token_id must be a token id .*: current value is "29"/,
    ],
    [
      "eos_token_ids outside the vocabulary",
      { "generation_config.json": '{"eos_token_id":[99999999,-1]}' },
      /generation_config\.json as eos_token_id must be a token id .*: current value is \[99999999,-1\]/,
    ],
    [
      "an eos_token_id in config.json written as a string",
      { "config.json": JSON.stringify({ ...baseConfig, eos_token_id: "29" }) },
      /config\.json as eos_token_id must be valid/,
    ],
  ];
  for (const [what, files, message] of checkpoints) {
    res = await post("/v1/load_checkpoint", {
      model_name: "bad-checkpoint",
      checkpoint_path: await folder(files),
    });
    assert.equal(res.status, 400, `${what}: ${res.text}`);
    assert.equal(res.error.param, "checkpoint_path", what);
    assert.match(res.error.message, message, `${what}: ${res.error.message}`);
  }
  // Request bodies that are no JSON object, or hold a field of the wrong type.
  for (const body of ["{", "null", "[1]", '{"lora_name":"x","lora_path":5}']) {
    const r = await fetch(`${url}/v1/load_lora_adapter`, {
      method: "POST",
      headers: { authorization: `Bearer ${f.keyA}`, "content-type": "application/json" },
      body,
    });
    const text = await r.text();
    assert.equal(r.status, 400, `${body}: ${text}`);
    if (body.includes("lora_path")) assert.equal(JSON.parse(text).error.param, "lora_path");
  }
  const ids = [];
  for await (const m of client(f.keyA).models.list()) ids.push(m.id);
  assert.ok(!ids.includes("bad-adapter") && !ids.includes("bad-checkpoint"), ids.join(", "));
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "base" })).status, 200);
});

Deno.test("weights holding NaN or Infinity are a 400 at load naming the file and tensor, and nothing is loaded", async () => {
  const store = f.s3.store;
  const base = await published(crypto.randomUUID());
  let res = await post("/v1/load_checkpoint", { model_name: "finite-base", checkpoint_path: base });
  assert.equal(res.status, 200, res.text);
  const prefix = base.slice(`s3://${store.bucket}/`.length);
  const keys = await store.list(prefix);
  const put = async (files: Map<string, Uint8Array>, from: string[] = []) => {
    const to = `tenants/${f.tenantA.id}/nonfinite/${crypto.randomUUID()}/`;
    for (const key of from) {
      const name = key.slice(prefix.length);
      if (!files.has(name)) await store.put(to + name, await store.get(key));
    }
    for (const [name, bytes] of files) await store.put(to + name, bytes);
    return `s3://${store.bucket}/${to}`;
  };
  // A full model whose second tensor holds a NaN at element 5.
  const weights = readSafetensors(await store.get(`${prefix}model.safetensors`));
  const [, [badName, bad]] = [...weights.tensors];
  bad.data[5] = NaN;
  const nanModel = await put(
    new Map([["model.safetensors", writeSafetensors(weights.tensors)]]),
    keys,
  );
  res = await post("/v1/load_checkpoint", { model_name: "nan-model", checkpoint_path: nanModel });
  assert.equal(res.status, 400, res.text);
  assert.equal(res.error.param, "checkpoint_path");
  assert.match(
    res.error.message,
    new RegExp(
      `model\\.safetensors as its tensor ${badName} must hold finite numbers: element 5 is NaN`,
    ),
  );
  // Adapters: one holding Infinity, and one of finite factors whose merged product overflows.
  const config = JSON.parse(
    new TextDecoder().decode(await store.get(`${prefix}config.json`)),
  );
  const c = configFromJson(config);
  const lora: LoraConfig = { rank: 2, alpha: 4, dropout: 0, target_modules: ["q_proj"] };
  const specs = loraParameterSpecs(c, lora);
  const adapter = (fill: number, infinityAt?: number) => {
    const params = new Map(specs.map((s) => {
      const data = new Float32Array(s.shape.reduce((a, b) => a * b, 1)).fill(fill);
      return [s.name, data];
    }));
    if (infinityAt !== undefined) params.get(specs[1].name)![infinityAt] = Infinity;
    return put(saveAdapter(c, lora, params, "finite-base"));
  };
  res = await post("/v1/load_lora_adapter", {
    lora_name: "inf-adapter",
    lora_path: await adapter(0, 3),
  });
  assert.equal(res.status, 400, res.text);
  assert.equal(res.error.param, "lora_path");
  assert.match(
    res.error.message,
    new RegExp(
      `adapter_model\\.safetensors as its tensor base_model\\.model\\.${
        specs[1].name.replaceAll(".", "\\.")
      } must hold finite numbers: element 3 is Infinity`,
    ),
  );
  res = await post("/v1/load_lora_adapter", {
    lora_name: "overflow-adapter",
    lora_path: await adapter(1e20),
  });
  assert.equal(res.status, 400, res.text);
  assert.equal(res.error.param, "lora_path");
  assert.match(res.error.message, /merged onto its base makes .*q_proj.* non-finite/);
  // Nothing was loaded; the base still answers.
  const ids = [];
  for await (const m of client(f.keyA).models.list()) ids.push(m.id);
  assert.deepEqual(ids.filter((id) => /nan|inf|overflow/.test(id)), []);
  res = await post("/v1/completions", { model: "finite-base", prompt: [1, 2], max_tokens: 1 });
  assert.equal(res.status, 200, res.text);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "finite-base" })).status, 200);
});

Deno.test("stop the named-model test server and fixture", async () => {
  await server.stop();
  await f.close();
});
