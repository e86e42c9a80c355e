/**
 * The server as a rollout engine, over real HTTP on a real port: token-id prompts, `logprobs: 0`
 * with `return_tokens_as_token_ids` (vLLM's shapes), models loaded by name at runtime
 * (`/v1/load_checkpoint`, vLLM's `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`), each
 * checked against the trainer's own score pass on the same weights.
 */
import assert from "node:assert/strict";
import {
  initLoraParameters,
  type LoraConfig,
  mergeLora,
  parameterSpecs,
  Policy,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import { TextPolicy } from "../../../workers/seed/mod.ts";
import { policyPublisher, storeUpload } from "../../../workers/seed/run/publish_policy.ts";
import { startServer } from "../../../workers/serve/main.ts";
import { tinySokobanPolicy } from "../seed/_jobs.ts";
import { startServeFixture } from "./_fixture.ts";

const LORA: LoraConfig = { rank: 4, alpha: 8, dropout: 0, target_modules: ["q_proj", "v_proj"] };

Deno.test("the server loads policies by name and answers token-id prompts with the trainer's log-probs", async () => {
  const f = await startServeFixture();
  const server = startServer({ db: f.db, store: f.s3.store, SERVE_PORT: 0, authCacheMs: 0 });
  const { model, policy } = await tinySokobanPolicy();
  // an adapter whose B is not 0, so that merging it changes the answers
  const adapter = initLoraParameters(model.config, LORA, 7);
  for (const [name, t] of adapter) {
    if (name.includes("lora_B")) t.forEach((_, i) => t[i] = 0.05 * Math.sin(i + 1));
  }
  const params = new Map([...model.parameters, ...adapter]);
  const publish = policyPublisher({
    upload: storeUpload(f.s3.store, {
      tenantId: f.tenantA.id,
      jobId: crypto.randomUUID(),
      attempt: 1,
    }),
    model: { ...model, parameters: params },
    lora: { config: LORA, baseModel: "builtin:tiny" },
  });
  const merged = new Policy(
    model.config,
    mergeLora(model.config, params, LORA, parameterSpecs(model.config)),
    { threads: 1 },
  );
  const url = `http://127.0.0.1:${server.port}`;
  const post = (path: string, body: unknown, key = f.keyA) =>
    fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const prompt = theta.promptIds(f.prompt);
  const complete = async (name: string, key = f.keyA) => {
    const res = await post("/v1/completions", {
      model: name,
      prompt,
      max_tokens: 8,
      temperature: 1,
      seed: 11,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    }, key);
    return { status: res.status, body: await res.json() };
  };
  try {
    const v1 = await publish(1);
    assert.equal(v1.kind, "lora");
    // the base, then the adapter merged onto it, as the rollout engine loads them
    let res = await post("/v1/load_checkpoint", {
      model_name: "p",
      checkpoint_path: v1.basePath,
    });
    assert.equal(res.status, 200, await res.text());
    res = await post("/v1/load_lora_adapter", {
      lora_name: "p-v1",
      lora_path: v1.path,
      base_model_name: "p",
    });
    assert.equal(await res.text(), "Success: LoRA adapter 'p-v1' added successfully.");

    for (const [name, reference] of [["p", policy], ["p-v1", merged]] as const) {
      const { status, body } = await complete(name);
      assert.equal(status, 200, JSON.stringify(body));
      assert.equal(body.model, name);
      const lp = body.choices[0].logprobs;
      const ids = lp.tokens.map((t: string) => Number(/^token_id:(\d+)$/.exec(t)![1]));
      assert.ok(ids.length > 0);
      const score = await reference.score([{ prompt, response: ids }]);
      lp.token_logprobs.forEach((x: number, k: number) => {
        assert.ok(Math.abs(x - score.logprobs[0][k]) < 1e-4, `${name} token ${k}`);
      });
      if (name === "p-v1") {
        // the adapter changed the model: the base scores these tokens otherwise
        const base = await policy.score([{ prompt, response: ids }]);
        assert.ok(base.logprobs[0].some((x, k) => Math.abs(x - lp.token_logprobs[k]) > 1e-3));
      }
    }

    // vLLM's answers: a taken name is a 400, an unknown one a 404
    res = await post("/v1/load_lora_adapter", { lora_name: "p-v1", lora_path: v1.path });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /already been loaded/);
    // another tenant neither sees the name nor reads the path
    assert.equal((await complete("p-v1", f.keyB)).status, 404);
    res = await post("/v1/load_checkpoint", {
      model_name: "q",
      checkpoint_path: v1.basePath,
    }, f.keyB);
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.param, "checkpoint_path");
    // bad input names the field
    res = await post("/v1/completions", { model: "p", prompt: [1, 10 ** 6], logprobs: 0 });
    assert.equal((await res.json()).error.param, "prompt");
    res = await post("/v1/completions", { model: "p", prompt: [1, 2], logprobs: 21 });
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error.param, "logprobs");

    res = await post("/v1/unload_lora_adapter", { lora_name: "p-v1" });
    assert.equal(res.status, 200, await res.text());
    assert.equal((await complete("p-v1")).status, 404);
    res = await post("/v1/unload_lora_adapter", { lora_name: "p-v1" });
    assert.equal(res.status, 404);
  } finally {
    await merged.release();
    await policy.release();
    await server.stop();
    await f.close();
  }
});

/**
 * A server keeping two named models, the tiny policy and an upload target of a fresh job id in
 * tenant A, and `post` as tenant A; `close` stops and releases them all.
 */
async function twoSlotServer() {
  const f = await startServeFixture();
  const server = startServer({
    db: f.db,
    store: f.s3.store,
    SERVE_PORT: 0,
    authCacheMs: 0,
    SERVE_MAX_NAMED_MODELS: 2,
  });
  const { model, policy } = await tinySokobanPolicy();
  const upload = storeUpload(f.s3.store, {
    tenantId: f.tenantA.id,
    jobId: crypto.randomUUID(),
    attempt: 1,
  });
  const url = `http://127.0.0.1:${server.port}`;
  const post = (path: string, body: unknown) =>
    fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${f.keyA}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const close = async () => {
    await policy.release();
    await server.stop();
    await f.close();
  };
  return { f, model, upload, post, close };
}

Deno.test("named models are bounded by SERVE_MAX_NAMED_MODELS, and an evicted one loads again on its next request", async () => {
  const { f, model, upload, post, close } = await twoSlotServer();
  const adapter = initLoraParameters(model.config, LORA, 7);
  for (const [name, t] of adapter) {
    if (name.includes("lora_B")) t.forEach((_, i) => t[i] = 0.05 * Math.sin(i + 1));
  }
  const full = await policyPublisher({ upload, model })(0);
  const lora = await policyPublisher({
    upload,
    model: { ...model, parameters: new Map([...model.parameters, ...adapter]) },
    lora: { config: LORA, baseModel: "builtin:tiny" },
  })(1);
  assert.equal(lora.kind, "lora");
  /** A seeded completion on `name`: its status and (on 200) its token ids and log-probs. */
  const complete = async (name: string) => {
    const res = await post("/v1/completions", {
      model: name,
      prompt: [1, 2, 3],
      max_tokens: 6,
      temperature: 1,
      seed: 3,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    });
    const body = await res.json();
    return {
      status: res.status,
      answer: res.ok
        ? [body.choices[0].logprobs.tokens, body.choices[0].logprobs.token_logprobs]
        : body.error,
    };
  };
  const load = async (name: string, path: string) => {
    const res = await post("/v1/load_checkpoint", { model_name: name, checkpoint_path: path });
    assert.equal(res.status, 200, await res.text());
  };
  try {
    await load("base", lora.basePath!);
    let res = await post("/v1/load_lora_adapter", {
      lora_name: "tuned",
      lora_path: lora.path,
      base_model_name: "base",
    });
    assert.equal(res.status, 200, await res.text());
    const before = { base: await complete("base"), tuned: await complete("tuned") };
    assert.equal(before.tuned.status, 200);
    assert.notDeepEqual(before.tuned.answer, before.base.answer, "the adapter changes answers");

    // two more models evict both: the adapter and its base
    await load("a", full.path);
    await load("b", full.path);
    // each evicted name answers as before its eviction (loaded again, the adapter onto the
    // base's weights read again), and the bound still holds
    assert.deepEqual(await complete("tuned"), before.tuned);
    assert.deepEqual(await complete("base"), before.base);
    assert.equal(await complete("a").then((r) => r.status), 200);
    // vLLM's rule holds for an evicted name too: it is still loaded as far as a client knows
    res = await post("/v1/load_lora_adapter", { lora_name: "b", lora_path: lora.path });
    assert.equal(res.status, 400);
    // unloading an evicted name drops it
    res = await post("/v1/unload_lora_adapter", { lora_name: "tuned" });
    assert.equal(res.status, 200, await res.text());
    assert.equal((await complete("tuned")).status, 404);
    // an evicted name whose folder was deleted since: a 404 that says why
    await load("gone", lora.basePath!);
    await load("c", full.path); // evicts "a" (least recently used)... and "base"
    for (const key of await f.s3.store.list(lora.basePath!.replace(/^s3:\/\/[^/]+\//, ""))) {
      await f.s3.store.delete(key);
    }
    const gone = await complete("base");
    assert.equal(gone.status, 404);
    assert.match(gone.answer.message, /was evicted and cannot be loaded again/);
    assert.equal(gone.answer.code, "model_not_found");
    // and every later request says the same
    const again = await complete("base");
    assert.equal(again.status, 404);
    assert.deepEqual(again.answer, gone.answer);
  } finally {
    await close();
  }
});

Deno.test("under eviction pressure every request for a loaded or evicted name is answered, never a 404", async () => {
  const { model, upload, post, close } = await twoSlotServer();
  const full = await policyPublisher({ upload, model })(0);
  try {
    const names = ["n0", "n1", "n2", "n3", "n4", "n5"];
    for (const name of names) {
      const res = await post("/v1/load_checkpoint", {
        model_name: name,
        checkpoint_path: full.path,
      });
      assert.equal(res.status, 200, await res.text());
    }
    // Six names over two slots, three requests each at once: a name loaded again for one request
    // is evicted by another's load before the first can take it, unless the load holds it for
    // its waiters (it failed as a 404 "does not exist" before).
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all([...names, ...names, ...names].map(async (name) => {
        const res = await post("/v1/completions", {
          model: name,
          prompt: [1, 2, 3],
          max_tokens: 2,
          temperature: 0,
        });
        return `${res.status} ${res.ok ? (await res.json()).model : await res.text()}`;
      }));
      assert.deepEqual(answers, [...names, ...names, ...names].map((n) => `200 ${n}`));
    }
  } finally {
    await close();
  }
});

Deno.test("sampling_stream draws choice j from the local generate's stream of row row + j", async () => {
  const f = await startServeFixture();
  const server = startServer({ db: f.db, store: f.s3.store, SERVE_PORT: 0, authCacheMs: 0 });
  const { model, policy } = await tinySokobanPolicy();
  const publish = policyPublisher({
    upload: storeUpload(f.s3.store, {
      tenantId: f.tenantA.id,
      jobId: crypto.randomUUID(),
      attempt: 1,
    }),
    model,
  });
  const url = `http://127.0.0.1:${server.port}`;
  const post = (path: string, body: unknown) =>
    fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${f.keyA}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  try {
    const v0 = await publish(0);
    const res = await post("/v1/load_checkpoint", { model_name: "p", checkpoint_path: v0.path });
    assert.equal(res.status, 200, await res.text());
    const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
    const prompt = theta.promptIds(f.prompt);
    // the trainer's batch of 5 copies of one prompt, seed 77: row r draws from choiceRng(77, r)
    const local = await policy.generate(Array(5).fill(prompt), {
      maxNewTokens: 8,
      temperature: 0.9,
      seed: 77,
    });
    const remote = async (row: number, n: number) => {
      const r = await post("/v1/completions", {
        model: "p",
        prompt,
        max_tokens: 8,
        temperature: 0.9,
        n,
        sampling_stream: { seed: 77, row },
        logprobs: 0,
        return_tokens_as_token_ids: true,
      });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      return body.choices.map((c: { logprobs: { tokens: string[] } }) =>
        c.logprobs.tokens.map((t) => Number(t.slice("token_id:".length)))
      );
    };
    const eos = new Set(theta.tokenizer.stopTokenIds);
    const sampled = local.map((g) => g.tokens.filter((t) => !eos.has(t)));
    assert.deepEqual(await remote(3, 1), [sampled[3]]);
    assert.deepEqual(await remote(1, 2), [sampled[1], sampled[2]]);
    assert.notDeepEqual(sampled[1], sampled[2]); // the rows' streams differ
    // out of range is a 400 naming the field
    const bad = await post("/v1/completions", {
      model: "p",
      prompt,
      sampling_stream: { seed: -1, row: 0 },
    });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.param, /^sampling_stream/);
  } finally {
    await policy.release();
    await server.stop();
    await f.close();
  }
});
