/**
 * The inference server on a checkpoint whose tokenizer has a chat template of its own (Qwen3's
 * config at width 32, random weights, the real Qwen3 tokenizer), over real HTTP with the `openai`
 * client: a chat request is rendered and encoded exactly as the trainer renders a turn prompt
 * (workers/model/chat_template.ts), so greedy output equals the trainer's greedy generation.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { initParameters } from "../../../workers/model/mod.ts";
import { ACTION_STOP } from "../../../workers/seed/text_policy.ts";
import { startServer } from "../../../workers/serve/main.ts";
import { SMALL_QWEN3 } from "../../api/_qwen3_model.ts";
import { qwen3TokenizerFiles } from "../model/_qwen3.ts";
import { saveJob } from "../../../workers/seed/run/saved_job.ts";
import { startServeFixture, trainerPolicy } from "./_fixture.ts";

Deno.test("a chat-template checkpoint is served through the template it was trained with", async () => {
  const fx = await startServeFixture();
  const model = {
    config: SMALL_QWEN3,
    parameters: initParameters(SMALL_QWEN3, 3),
    tokenizer: qwen3TokenizerFiles(),
    generationConfig: null,
  };
  const jobId = await saveJob(fx.db, fx.s3.store, fx.tenantA.id, [{ step: 0, model }]);
  const server = startServer({
    db: fx.db,
    store: fx.s3.store,
    SERVE_PORT: 0,
    SERVE_THREADS: 1,
    authCacheMs: 0,
  });
  const trainer = await trainerPolicy(fx, jobId, 0);
  try {
    assert.equal(trainer.text.form, "chat_template");
    const client = new OpenAI({
      apiKey: fx.keyA,
      baseURL: `http://127.0.0.1:${server.port}/v1`,
      maxRetries: 0,
    });
    const expected = await trainer.text.generate([fx.prompt], {
      maxNewTokens: 12,
      temperature: 0,
      seed: 0,
      stop: [ACTION_STOP],
    });
    const r = await client.chat.completions.create({
      model: `job:${jobId}@0`,
      messages: [{ role: "user", content: fx.prompt }],
      temperature: 0,
      max_tokens: 12,
      stop: [ACTION_STOP],
    });
    const promptIds = trainer.text.promptIds(fx.prompt);
    assert.equal(promptIds[0], 151644, "<|im_start|>, no BOS added");
    assert.equal(r.usage?.prompt_tokens, promptIds.length, "the trainer's rendered prompt");
    const text = r.choices[0].message.content ?? "";
    const trainerText = expected.texts[0];
    assert.equal(
      r.choices[0].finish_reason === "stop" && trainerText.endsWith(ACTION_STOP)
        ? (text + ACTION_STOP).trim()
        : text.trim(),
      trainerText,
    );
  } finally {
    await trainer.text.policy.release();
    await server.stop();
    await fx.close();
  }
});

Deno.test("a checkpoint whose generation_config.json lists several EOS ids stops on each of them, on the server and in the trainer", async () => {
  const fx = await startServeFixture();
  const parameters = initParameters(SMALL_QWEN3, 3);
  const plain = { config: SMALL_QWEN3, parameters, tokenizer: qwen3TokenizerFiles() };
  const server = startServer({
    db: fx.db,
    store: fx.s3.store,
    SERVE_PORT: 0,
    SERVE_THREADS: 1,
    authCacheMs: 0,
  });
  const client = new OpenAI({
    apiKey: fx.keyA,
    baseURL: `http://127.0.0.1:${server.port}/v1`,
    maxRetries: 0,
  });
  /** Seeded chat on `model`: the sampled ids, the finish reason and the usage's token count. */
  const sampled = async (model: string) => {
    const r = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: fx.prompt }],
      temperature: 1,
      seed: 5,
      max_tokens: 12,
      logprobs: true,
      ...{ return_tokens_as_token_ids: true },
    });
    const ids = r.choices[0].logprobs!.content!.map((e) => Number(e.token.slice(9)));
    return { ids, finish: r.choices[0].finish_reason, tokens: r.usage!.completion_tokens };
  };
  const trainers: Awaited<ReturnType<typeof trainerPolicy>>[] = [];
  try {
    const first = await saveJob(fx.db, fx.s3.store, fx.tenantA.id, [
      { step: 0, model: { ...plain, generationConfig: null } },
    ]);
    const free = await sampled(`job:${first}@0`);
    assert.equal(free.finish, "length", "random weights: no EOS within 12 tokens");
    assert.equal(free.ids.length, 12);
    // the 4th sampled token (or the first later one not drawn before) becomes an extra EOS id
    const k = free.ids.findIndex((id, i) => i >= 3 && !free.ids.slice(0, i).includes(id));
    assert.ok(k >= 3, `no fresh token in ${free.ids}`);
    const eos = free.ids[k];
    assert.ok(![151643, 151645].includes(eos));
    const listed = await saveJob(fx.db, fx.s3.store, fx.tenantA.id, [{
      step: 0,
      model: { ...plain, generationConfig: { eos_token_id: [151645, 151643, eos] } },
    }]);
    const stopped = await sampled(`job:${listed}@0`);
    assert.equal(stopped.finish, "stop");
    assert.deepEqual(stopped.ids, free.ids.slice(0, k), "the tokens before the listed EOS");
    assert.equal(stopped.tokens, k + 1, "the ending EOS counted");

    // the trainer reads the same list: its draws (the server's) end where the server's do
    for (const job of [first, listed]) trainers.push(await trainerPolicy(fx, job, 0));
    const [a, b] = await Promise.all(
      trainers.map((t) =>
        t.text.policy.generate([t.text.promptIds(fx.prompt)], {
          maxNewTokens: 12,
          temperature: 1,
          seed: 5,
          eosTokenIds: [...t.text.stopTokenIds],
        })
      ),
    );
    assert.deepEqual(a[0].tokens, free.ids);
    assert.deepEqual(b[0].tokens, [...free.ids.slice(0, k), eos]);
  } finally {
    for (const t of trainers) await t.text.policy.release();
    await server.stop();
    await fx.close();
  }
});
