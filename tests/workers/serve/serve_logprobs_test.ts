/**
 * Log-probs in OpenAI's shapes through the real server and the official `openai` client, checked
 * against the trainer's own log-probs of the same tokens (`Policy.score`); an uploaded model
 * served as `model:<id>`; a LoRA checkpoint holding only its adapter served with the adapter
 * merged in at load, token for token as the same job's merged weights.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { commitModel, modelPrefix } from "../../../jobs/mod.ts";
import {
  createBuiltinTiny,
  initLoraParameters,
  loadHfDirectory,
  type LoraConfig,
  Policy,
  promptFormOf,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import { tinyQwen3Files } from "../../../workers/model/tiny_qwen3.ts";
import { builtinVocabulary } from "../../../workers/seed/run/model_source.ts";
import { derivedSeed, SEED_USE } from "../../../workers/seed/run/seeds.ts";
import { type RunningServer, startServer } from "../../../workers/serve/main.ts";
import { encodePrompt, renderChat } from "../../../workers/serve/prompt.ts";
import { jobWithCheckpoints, startServeFixture, trainerPolicy } from "./_fixture.ts";
import { saveJob } from "../../../workers/seed/run/saved_job.ts";

const fx = await startServeFixture();
const job = await jobWithCheckpoints(fx, fx.tenantA, { steps: [0], seed: 21 });
const server: RunningServer = startServer({
  db: fx.db,
  store: fx.s3.store,
  SERVE_PORT: 0,
  SERVE_THREADS: 1,
  authCacheMs: 0,
});
const baseURL = `http://127.0.0.1:${server.port}/v1`;
const a = new OpenAI({ apiKey: fx.keyA, baseURL, maxRetries: 0 });

/** Token ids of `token_id:<id>` strings (vLLM's `return_tokens_as_token_ids`). */
const idsOf = (tokens: string[]) =>
  tokens.map((t) => {
    const m = /^token_id:(\d+)$/.exec(t);
    assert.ok(m, t);
    return Number(m[1]);
  });

/** The trainer's log-probs of `response` after `prompt` (float32 graph, one thread). */
async function trainerLogprobs(policy: Policy, prompt: number[], response: number[]) {
  const scored = await policy.score([{ prompt, response }]);
  return Array.from(scored.logprobs[0]);
}

function assertClose(got: number[], want: number[], what: string) {
  assert.equal(got.length, want.length, what);
  for (let i = 0; i < got.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) < 1e-4, `${what}[${i}]: ${got[i]} vs ${want[i]}`);
  }
}

Deno.test("log-probs, uploaded models and adapter-only LoRA checkpoints through the server", async (t) => {
  const trainer = await trainerPolicy(fx, job, 0);
  try {
    await t.step("chat log-probs are the trainer's log-probs of the sampled tokens", async () => {
      const r = await a.chat.completions.create({
        model: `job:${job}`,
        messages: [{ role: "user", content: fx.prompt }],
        max_tokens: 12,
        seed: 3,
        logprobs: true,
        top_logprobs: 3,
        // vLLM's extension, sent as an extra body field
        ...{ return_tokens_as_token_ids: true },
      });
      const content = r.choices[0].logprobs!.content!;
      assert.ok(content.length >= 1);
      const ids = idsOf(content.map((e) => e.token));
      const want = await trainerLogprobs(
        trainer.text.policy,
        trainer.text.promptIds(fx.prompt),
        ids,
      );
      assertClose(content.map((e) => e.logprob), want, "logprob");
      for (const e of content) {
        assert.equal(e.top_logprobs.length, 3);
        const tops = e.top_logprobs.map((x) => x.logprob);
        assert.deepEqual(tops, [...tops].sort((x, y) => y - x), "most likely first");
        assert.ok(tops[0] >= e.logprob - 1e-6);
        assert.ok(tops.every((x) => x <= 0));
      }
    });

    await t.step(
      "greedy chat: each token is its own most likely one, and tokens spell the text",
      async () => {
        const r = await a.chat.completions.create({
          model: `job:${job}`,
          messages: [{ role: "user", content: fx.prompt }],
          max_tokens: 10,
          temperature: 0,
          logprobs: true,
          top_logprobs: 2,
        });
        const c = r.choices[0];
        const content = c.logprobs!.content!;
        for (const e of content) {
          assert.equal(e.top_logprobs[0].token, e.token);
          assert.equal(e.top_logprobs[0].logprob, e.logprob);
        }
        const bytes = content.flatMap((e) => e.bytes!);
        assert.equal(new TextDecoder().decode(new Uint8Array(bytes)), c.message.content);
        assert.equal(
          content.length,
          r.usage!.completion_tokens - (c.finish_reason === "stop" ? 1 : 0),
        );
      },
    );

    await t.step(
      "streamed chat log-probs are the same tokens and numbers as the JSON answer",
      async () => {
        const request = {
          model: `job:${job}`,
          messages: [{ role: "user" as const, content: fx.prompt }],
          max_tokens: 12,
          seed: 8,
          logprobs: true,
          top_logprobs: 1,
        };
        const whole = await a.chat.completions.create(request);
        const streamed: { token: string; logprob: number }[] = [];
        let text = "";
        for await (const chunk of await a.chat.completions.create({ ...request, stream: true })) {
          const choice = chunk.choices[0];
          if (!choice) continue;
          text += choice.delta.content ?? "";
          for (const e of choice.logprobs?.content ?? []) streamed.push(e);
        }
        assert.equal(text, whole.choices[0].message.content);
        assert.deepEqual(
          streamed.map((e) => [e.token, e.logprob]),
          whole.choices[0].logprobs!.content!.map((e) => [e.token, e.logprob]),
        );
      },
    );

    await t.step("completions log-probs in the legacy shape are the trainer's", async () => {
      const r = await a.completions.create({
        model: `job:${job}`,
        prompt: fx.prompt,
        max_tokens: 8,
        seed: 4,
        logprobs: 2,
        ...{ return_tokens_as_token_ids: true },
      });
      const lp = r.choices[0].logprobs!;
      const ids = idsOf(lp.tokens!);
      const prompt = encodePrompt(
        { tokenizer: new Tokenizer(trainer.model.tokenizer), promptForm: "plain" },
        fx.prompt,
        "completion",
      );
      assertClose(
        lp.token_logprobs!,
        await trainerLogprobs(trainer.text.policy, prompt, ids),
        "lp",
      );
      assert.equal(lp.top_logprobs!.length, ids.length);
      for (const top of lp.top_logprobs!) assert.equal(Object.keys(top).length, 2);
      assert.equal(lp.text_offset![0], 0);
      const plain = await a.completions.create({
        model: `job:${job}`,
        prompt: fx.prompt,
        max_tokens: 8,
        seed: 4,
        logprobs: 0,
      });
      const p = plain.choices[0];
      assert.deepEqual(p.logprobs!.token_logprobs, lp.token_logprobs);
      assert.equal(p.logprobs!.tokens!.join(""), p.text);
      assert.deepEqual(
        p.logprobs!.text_offset,
        p.logprobs!.tokens!.map((_, i) => p.logprobs!.tokens!.slice(0, i).join("").length),
      );
    });

    await t.step(
      "top_logprobs without logprobs and too many alternatives are 400s naming the field",
      async () => {
        for (
          const [body, param] of [
            [{ top_logprobs: 2 }, "top_logprobs"],
            [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"],
          ] as const
        ) {
          const res = await fetch(`${baseURL}/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${fx.keyA}`, "content-type": "application/json" },
            body: JSON.stringify({
              model: `job:${job}`,
              messages: [{ role: "user", content: "x" }],
              ...body,
            }),
          });
          assert.equal(res.status, 400);
          const e = (await res.json()).error;
          assert.equal(e.param, param);
          assert.doesNotMatch(e.message, /\(log-probs\)/);
        }
      },
    );
  } finally {
    await trainer.text.policy.release();
  }

  await t.step(
    "an uploaded model is served as model:<id>, listed, and only to its tenant",
    async () => {
      const id = crypto.randomUUID();
      const files = [];
      for (const [name, bytes] of tinyQwen3Files()) {
        const key = `${modelPrefix(fx.tenantA.id, id)}${name}`;
        const put = await fx.s3.store.put(key, bytes);
        files.push({ name, key, bytes: put.bytes, sha256: put.sha256 });
      }
      await commitModel(fx.db, {
        id,
        tenantId: fx.tenantA.id,
        name: "tiny",
        architecture: "Qwen3ForCausalLM",
        config: {},
        parameterCount: 1,
        files,
        requestSha256: "0".repeat(64),
      });
      const r = await a.chat.completions.create({
        model: `model:${id}`,
        messages: [{ role: "user", content: "Say hello." }],
        max_tokens: 6,
        temperature: 0,
        logprobs: true,
        ...{ return_tokens_as_token_ids: true },
      });
      assert.equal(r.model, `model:${id}`);
      // the same folder as the trainer loads it scores the served tokens the same
      const hf = await loadHfDirectory((name) =>
        Promise.resolve(tinyQwen3Files().get(name) ?? null)
      );
      const tok = new Tokenizer(hf.tokenizer);
      const served = { tokenizer: tok, promptForm: promptFormOf(tok) };
      const prompt = encodePrompt(
        served,
        renderChat(served, [{ role: "user", content: "Say hello." }]),
        "chat",
      );
      const content = r.choices[0].logprobs!.content!;
      const ids = idsOf(content.map((e) => e.token));
      const policy = new Policy(hf.config, hf.parameters, { threads: 1 });
      try {
        assertClose(
          content.map((e) => e.logprob),
          await trainerLogprobs(policy, prompt, ids),
          "model:<id> logprob",
        );
      } finally {
        await policy.release();
      }
      const listed = [];
      for await (const m of a.models.list()) listed.push(m.id);
      assert.ok(listed.includes(`model:${id}`));
      const other = new OpenAI({ apiKey: fx.keyB, baseURL, maxRetries: 0 });
      await assert.rejects(
        other.chat.completions.create({
          model: `model:${id}`,
          messages: [{ role: "user", content: "x" }],
        }),
        (e: unknown) => e instanceof OpenAI.APIError && e.status === 404,
      );
    },
  );

  await t.step("a LoRA checkpoint without merged weights is served as the merged one", async () => {
    const lora: LoraConfig = {
      rank: 2,
      alpha: 4,
      dropout: 0,
      target_modules: ["q_proj", "v_proj"],
    };
    // the base as a job of random_seed 0 (saveJob's trainer state) builds it
    const model = createBuiltinTiny({
      vocabulary: await builtinVocabulary(fx.env),
      seed: derivedSeed(0, SEED_USE.init),
    });
    for (const [k, v] of initLoraParameters(model.config, lora, 1)) {
      // B is zero at init: give it values so the adapter moves the log-probs
      model.parameters.set(k, k.includes("lora_B") ? v.map((_, i) => 0.05 * Math.sin(i + 1)) : v);
    }
    const saved = (saveMerged: boolean) =>
      saveJob(fx.db, fx.s3.store, fx.tenantA.id, [{ step: 0, model }], [], {
        lora,
        baseModel: "builtin:tiny",
        saveMerged,
      });
    const [adapterOnly, merged] = [await saved(false), await saved(true)];
    const ask = (name: string) =>
      a.chat.completions.create({
        model: name,
        messages: [{ role: "user", content: fx.prompt }],
        max_tokens: 8,
        seed: 5,
        logprobs: true,
      });
    const [x, y] = [await ask(`job:${adapterOnly}`), await ask(`job:${merged}`)];
    assert.equal(x.choices[0].message.content, y.choices[0].message.content);
    assertClose(
      x.choices[0].logprobs!.content!.map((e) => e.logprob),
      y.choices[0].logprobs!.content!.map((e) => e.logprob),
      "adapter-only vs merged",
    );
  });

  await server.stop();
  await fx.close();
});
