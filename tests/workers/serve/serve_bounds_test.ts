/**
 * The operator's bounds of the inference server over real HTTP on a real port, with the real S3
 * server and the official `openai` client: `SERVE_MAX_REGISTERED_NAMES` (names a tenant may have
 * registered, loaded or evicted) and `SERVE_PREFIX_CACHE_MB` (prompt KV kept for later prompts),
 * each read from environment strings as `deno task serve` reads them.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { initLoraParameters, type LoraConfig } from "../../../workers/model/mod.ts";
import { policyPublisher, storeUpload } from "../../../workers/seed/run/publish_policy.ts";
import { serveConfigFromEnv, startServer } from "../../../workers/serve/main.ts";
import { tinySokobanPolicy } from "../seed/_jobs.ts";
import { jobWithCheckpoints, type ServeFixture, startServeFixture } from "./_fixture.ts";

const LORA: LoraConfig = { rank: 4, alpha: 8, dropout: 0, target_modules: ["q_proj", "v_proj"] };

/** A server over `f` with the settings `env` (strings, as in the environment). */
function serverWith(f: ServeFixture, env: Record<string, string>) {
  const server = startServer({
    ...serveConfigFromEnv(env),
    db: f.db,
    store: f.s3.store,
    SERVE_PORT: 0,
    authCacheMs: 0,
  });
  const url = `http://127.0.0.1:${server.port}`;
  const post = async (path: string, body: unknown, key = f.keyA) => {
    const res = await fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, error: res.ok ? null : JSON.parse(text).error };
  };
  const client = (key = f.keyA) => new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });
  /** Ids of the named models `key`'s tenant sees in `GET /v1/models`. */
  const named = async (key = f.keyA) => {
    const ids = [];
    for await (const m of client(key).models.list()) ids.push(m.id);
    return ids.filter((id) => !/^(job|model):/.test(id)).sort();
  };
  return { server, url, post, client, named };
}

Deno.test("a load under a new name past SERVE_MAX_REGISTERED_NAMES is a 400 that registers nothing; known names still load", async () => {
  const f = await startServeFixture();
  const { server, post, client, named } = serverWith(f, {
    SERVE_MAX_NAMED_MODELS: "1",
    SERVE_MAX_REGISTERED_NAMES: "2",
  });
  const { model, policy } = await tinySokobanPolicy();
  try {
    const publish = (tenantId: string) =>
      policyPublisher({
        upload: storeUpload(f.s3.store, { tenantId, jobId: crypto.randomUUID(), attempt: 1 }),
        model,
      })(0);
    const full = (await publish(f.tenantA.id)).path;
    const adapter = initLoraParameters(model.config, LORA, 7);
    const lora = await policyPublisher({
      upload: storeUpload(f.s3.store, {
        tenantId: f.tenantA.id,
        jobId: crypto.randomUUID(),
        attempt: 1,
      }),
      model: { ...model, parameters: new Map([...model.parameters, ...adapter]) },
      lora: { config: LORA, baseModel: "builtin:tiny" },
    })(1);
    const load = (name: string, key = f.keyA, at = full) =>
      post("/v1/load_checkpoint", { model_name: name, checkpoint_path: at }, key);

    assert.equal((await load("a")).status, 200);
    assert.equal((await load("b")).status, 200); // evicts "a", which stays registered
    // a third name: refused in OpenAI's error shape, naming the limit and how to free room
    const refused = await load("c");
    assert.equal(refused.status, 400, refused.text);
    assert.deepEqual(Object.keys(refused.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(refused.error.type, "invalid_request_error");
    assert.equal(refused.error.param, "model_name");
    assert.equal(refused.error.code, "named_model_limit_exceeded");
    assert.match(refused.error.message, /at most 2 \(SERVE_MAX_REGISTERED_NAMES\)/);
    assert.match(refused.error.message, /current count is 2/);
    assert.match(refused.error.message, /POST \/v1\/unload_lora_adapter/);
    // the same through vLLM's adapter route, at its own field
    const adapterRefused = await post("/v1/load_lora_adapter", {
      lora_name: "t",
      lora_path: lora.path,
      base_model_name: "b",
    });
    assert.equal(adapterRefused.status, 400, adapterRefused.text);
    assert.equal(adapterRefused.error.param, "lora_name");
    assert.equal(adapterRefused.error.code, "named_model_limit_exceeded");
    // nothing registered changed: the two names are listed and both answer
    assert.deepEqual(await named(), ["a", "b"]);
    for (const name of ["a", "b"]) {
      const r = await client().completions.create({ model: name, prompt: "go", max_tokens: 2 });
      assert.equal(r.model, name);
    }
    await assert.rejects(
      client().completions.create({ model: "c", prompt: "go", max_tokens: 2 }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 404,
    );
    // a registered name loads again (replacing it), evicted or not, by either route
    assert.equal((await load("a")).status, 200);
    assert.equal((await load("b")).status, 200);
    const inplace = await post("/v1/load_lora_adapter", {
      lora_name: "a",
      lora_path: lora.path,
      base_model_name: "b",
      load_inplace: true,
    });
    assert.equal(inplace.status, 200, inplace.text);
    assert.deepEqual(await named(), ["a", "b"]);
    // the bound is per tenant: another tenant still has all its room
    const otherFull = (await publish(f.tenantB.id)).path;
    for (const name of ["c", "d"]) {
      assert.equal((await load(name, f.keyB, otherFull)).status, 200);
    }
    assert.equal((await load("e", f.keyB, otherFull)).status, 400);
    assert.deepEqual(await named(f.keyB), ["c", "d"]);
    // unloading a name frees room for a new one
    assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "a" })).status, 200);
    assert.equal((await load("c")).status, 200);
    assert.deepEqual(await named(), ["b", "c"]);
  } finally {
    await policy.release();
    await server.stop();
    await f.close();
  }
});

Deno.test("two loads racing for the last registered name: one is loaded, the other refused", async () => {
  const f = await startServeFixture();
  const { server, post, named } = serverWith(f, {
    SERVE_MAX_NAMED_MODELS: "2",
    SERVE_MAX_REGISTERED_NAMES: "2",
  });
  const { model, policy } = await tinySokobanPolicy();
  try {
    const full = (await policyPublisher({
      upload: storeUpload(f.s3.store, {
        tenantId: f.tenantA.id,
        jobId: crypto.randomUUID(),
        attempt: 1,
      }),
      model,
    })(0)).path;
    const load = (name: string) =>
      post("/v1/load_checkpoint", { model_name: name, checkpoint_path: full });
    assert.equal((await load("first")).status, 200);
    // both pass the check made before reading the folder; the one set second must still be refused
    const answers = await Promise.all([load("x"), load("y")]);
    assert.deepEqual(answers.map((r) => r.status).sort(), [200, 400]);
    const won = answers[0].status === 200 ? "x" : "y";
    assert.equal(answers.find((r) => r.status === 400)!.error.code, "named_model_limit_exceeded");
    assert.deepEqual(await named(), ["first", won].sort());
  } finally {
    await policy.release();
    await server.stop();
    await f.close();
  }
});

Deno.test("SERVE_PREFIX_CACHE_MB bounds the prompt KV the server keeps; 0 keeps none and answers the same", async () => {
  const f = await startServeFixture();
  const jobId = await jobWithCheckpoints(f, f.tenantA, { steps: [1] });
  const servers = [
    serverWith(f, {}),
    serverWith(f, { SERVE_PREFIX_CACHE_MB: "0" }),
  ];
  try {
    const kept: number[] = [], texts: string[][] = [];
    for (const { url, client } of servers) {
      const out = [];
      // the second request begins with the first's prompt: with a cache, it starts from its KV
      for (const prompt of [f.prompt, f.prompt + " and more"]) {
        const r = await client().completions.create({
          model: `job:${jobId}`,
          prompt,
          max_tokens: 4,
          temperature: 0,
        });
        out.push(r.choices[0].text);
      }
      texts.push(out);
      const health = await (await fetch(`${url}/healthz`)).json();
      kept.push(health.prefix_cache_bytes);
    }
    assert.ok(kept[0] > 0 && kept[0] <= 256 * 2 ** 20, `default keeps ${kept[0]} bytes`);
    assert.equal(kept[1], 0);
    assert.deepEqual(texts[1], texts[0]);
  } finally {
    for (const { server } of servers) await server.stop();
    await f.close();
  }
});
