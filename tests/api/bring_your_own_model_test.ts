/**
 * Bring your own model, end to end as a new user runs it: the tiny model of `deno task
 * tiny-model` uploaded through the job API, a LoRA SEED job on it for every built-in environment
 * and a GRPO job, run by the real worker on Postgres and the S3 protocol; the adapter downloaded
 * through its presigned URL names the base's own name; the checkpoint (adapter only) chatted with
 * through the inference server and the official `openai` client. Sizes are the smallest that run
 * every stage (one step, one task, two samples).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createKey } from "../../jobs/mod.ts";
import { createApp } from "../../api/app.ts";
import { checkModel } from "../../api/main.ts";
import { TINY_QWEN3_NAME, tinyQwen3Files } from "../../workers/model/tiny_qwen3.ts";
import { readSafetensors } from "../../workers/model/mod.ts";
import { startServer } from "../../workers/serve/main.ts";
import { ONE_THREAD, openJobHarness, runOne } from "../workers/seed/_jobs.ts";
import { tarOf } from "../_harness/tar.ts";

const SMALL = {
  rollout: { tasks_per_step: 1, group_size: 2, max_new_tokens: 4 },
  seed: {
    // room for household's longest-to-spell skill sentence under its grammar
    analyzer_max_new_tokens: 96,
    analyzer_max_steps: 1,
    analyzer_max_field_chars: 32,
  },
  warmup: {
    policy: { episodes: 1, epochs: 1, batch_size: 8 },
    analyzer: { episodes: 1, epochs: 1, batch_size: 8 },
  },
  optim: { mini_batch_size: 8, lr: 1e-3 },
  steps: 1,
  eval_every: 1,
  checkpoint_every: 1,
  eval: { episodes: 1, splits: ["test_seen"] },
  random_seed: 3,
};

Deno.test("an uploaded tiny Qwen3 trains with LoRA on every built-in environment, and its adapter is downloaded and served", async () => {
  await using h = await openJobHarness();
  const tenant = (await h.db.query(`select name from tenants where id = $1::uuid`, [h.tenantId]))[
    0
  ] as { name: string };
  const { key } = await createKey(h.db, tenant.name);
  const app = createApp({ db: h.db, store: h.store, authCacheMs: 0, checkModel });
  const auth = { authorization: `Bearer ${key}` };

  const up = await app.request("/v1/models?name=tiny-qwen3", {
    method: "POST",
    headers: { ...auth, "content-type": "application/x-tar" },
    body: new Uint8Array(await tarOf(tinyQwen3Files(), "tiny-qwen3/")),
  });
  assert.equal(up.status, 201, await up.clone().text());
  const model = await up.json();
  assert.deepEqual(model.skipped_files, []);

  const submit = async (spec: Record<string, unknown>) => {
    const res = await app.request("/v1/jobs", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify(spec),
    });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()).id as string;
  };
  const worker = h.worker(ONE_THREAD);
  const lora = { rank: 2, alpha: 4, target_modules: ["q_proj", "v_proj"] };
  const envs: [string, Record<string, unknown>][] = [
    ["sokoban", {}],
    ["household", {}],
    ["webshop", {}],
    ["ezpoints", { render: "text" }], // the tiny model has no image encoder
    ["search", {}],
  ];
  const jobs: string[] = [];
  for (const [id, options] of envs) {
    const job = await submit({
      ...SMALL,
      model: { base: model.base, lora },
      env: { id, options, max_turns: 2, history: 0 },
    });
    assert.equal(await runOne(worker), "succeeded", `${id}: ${await h.error(job)}`);
    jobs.push(job);
  }
  const grpo = await submit({
    ...SMALL,
    method: "grpo",
    model: { base: model.base, lora },
    env: { id: "sokoban", max_turns: 2, history: 0 },
  });
  assert.equal(await runOne(worker), "succeeded", await h.error(grpo));

  // the adapter as a user downloads it: PEFT is given the base's own name, the one given at
  // upload (the model's config names TINY_QWEN3_NAME); the service's reference stays in the
  // weights' metadata
  const file = await app.request(
    `/v1/jobs/${jobs[0]}/checkpoints/1/files/adapter_config.json?redirect=false`,
    { headers: auth },
  );
  assert.equal(file.status, 200);
  const adapter = await (await fetch((await file.json()).url)).json();
  assert.equal(adapter.base_model_name_or_path, "tiny-qwen3");
  assert.notEqual(TINY_QWEN3_NAME, "tiny-qwen3");
  assert.equal(adapter.r, 2);
  const weights = await app.request(
    `/v1/jobs/${jobs[0]}/checkpoints/1/files/adapter_model.safetensors?redirect=false`,
    { headers: auth },
  );
  const metadata = readSafetensors(
    new Uint8Array(await (await fetch((await weights.json()).url)).arrayBuffer()),
  ).metadata;
  assert.equal(metadata.seed_base_model, model.base);

  const server = startServer({
    db: h.db,
    store: h.store,
    SERVE_PORT: 0,
    SERVE_THREADS: 1,
    authCacheMs: 0,
  });
  try {
    const client = new OpenAI({
      apiKey: key,
      baseURL: `http://127.0.0.1:${server.port}/v1`,
      maxRetries: 0,
    });
    const r = await client.chat.completions.create({
      model: `job:${jobs[0]}`,
      messages: [{ role: "user", content: "Push the box onto the target." }],
      max_tokens: 4,
      temperature: 0,
      logprobs: true,
    });
    assert.equal(r.model, `job:${jobs[0]}@1`);
    assert.ok(r.choices[0].logprobs!.content!.length >= 1);
    const base = await client.chat.completions.create({
      model: model.base,
      messages: [{ role: "user", content: "Push the box onto the target." }],
      max_tokens: 4,
      temperature: 0,
    });
    assert.equal(base.model, model.base);
  } finally {
    await server.stop();
  }
});
