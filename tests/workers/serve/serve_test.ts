/**
 * The inference server over real HTTP, driven by the official `openai` npm client (and curl):
 * chat and completions against the trainer's own greedy generation for the same checkpoint and
 * prompt, streaming, stop strings, `n`, seeds, skills at inference, keys and tenants, bad input in
 * OpenAI's error shape, and a checkpoint whose stored object was corrupted.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { getCheckpoint, revokeKey } from "../../../jobs/mod.ts";
import { insertSkill } from "../../../workers/skills/mod.ts";
import { ACTION_STOP } from "../../../workers/seed/text_policy.ts";
import { type RunningServer, startServer } from "../../../workers/serve/main.ts";
import { jobWithCheckpoints, startServeFixture, trainerPolicy } from "./_fixture.ts";

const fx = await startServeFixture();
const SKILLS = [
  { text: "Walk around the wall before you push anything", won: 3, lost: 0 },
  { text: "Never push the box into a corner", won: 0, lost: 2 },
  {
    text: "Push the box up onto the target, then stop",
    summary: "won in four moves",
    won: 1,
    lost: 1,
  },
];
const jobA = await jobWithCheckpoints(fx, fx.tenantA, { steps: [0, 2], skills: { 2: SKILLS } });
const jobB = await jobWithCheckpoints(fx, fx.tenantB, { steps: [0], seed: 9 });
const server: RunningServer = startServer({
  db: fx.db,
  store: fx.s3.store,
  SERVE_PORT: 0,
  SERVE_THREADS: 1,
  authCacheMs: 0,
});
const baseURL = `http://127.0.0.1:${server.port}/v1`;
const client = (apiKey = fx.keyA) => new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const a = client();

/** Error body of a failed openai-client call. */
async function apiError(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call;
  } catch (e) {
    if (e instanceof OpenAI.APIError) return e;
    throw e;
  }
  throw new Error("Cannot read the API error as the call must fail: it succeeded");
}

/** A raw POST (for bodies the client will not send). */
async function post(path: string, body: string, key = fx.keyA) {
  const res = await fetch(`${baseURL}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  return { status: res.status, body: await res.json() };
}

Deno.test("the inference server", async (t) => {
  try {
    await t.step(
      "GET /v1/models lists the tenant's checkpoints and no other tenant's",
      async () => {
        const ids = [];
        for await (const m of a.models.list()) ids.push(m.id);
        assert.deepEqual(ids, [`job:${jobA}`, `job:${jobA}@0`, `job:${jobA}@2`]);
        const one = await a.models.retrieve(`job:${jobA}@2`);
        assert.equal(one.owned_by, fx.tenantA.name);
        const bIds = [];
        for await (const m of client(fx.keyB).models.list()) bIds.push(m.id);
        assert.deepEqual(bIds, [`job:${jobB}`, `job:${jobB}@0`]);
      },
    );

    await t.step(
      "greedy chat through the server equals the trainer's greedy generation",
      async () => {
        for (const step of [0, 2]) {
          const trainer = await trainerPolicy(fx, jobA, step);
          const expected = await trainer.text.generate([fx.prompt], {
            maxNewTokens: 24,
            temperature: 0,
            seed: 0,
            stop: [ACTION_STOP],
          });
          const r = await a.chat.completions.create({
            model: step === 2 ? `job:${jobA}` : `job:${jobA}@0`,
            messages: [{ role: "user", content: fx.prompt }],
            temperature: 0,
            max_tokens: 24,
            stop: [ACTION_STOP],
          });
          assert.equal(r.model, `job:${jobA}@${step}`);
          assert.equal(r.object, "chat.completion");
          const c = r.choices[0];
          const text = c.message.content ?? "";
          // the trainer keeps the stop string and trims; OpenAI's shape drops the stop string
          const trainerText = expected.texts[0];
          assert.equal(
            c.finish_reason === "stop" && trainerText.endsWith(ACTION_STOP)
              ? (text + ACTION_STOP).trim()
              : text.trim(),
            trainerText,
          );
          const promptIds = trainer.text.promptIds(fx.prompt);
          assert.equal(r.usage?.prompt_tokens, promptIds.length);
          assert.ok(r.usage!.completion_tokens >= 1 && r.usage!.completion_tokens <= 24);
          assert.equal(r.usage?.total_tokens, promptIds.length + r.usage!.completion_tokens);
          await trainer.text.policy.release();
        }
      },
    );

    let longText = "";
    await t.step(
      "completions: n choices, seeds replay, streaming gives the same text",
      async () => {
        const req = {
          model: `job:${jobA}@2`,
          prompt: fx.prompt + "\n",
          max_tokens: 40,
          temperature: 1,
          n: 3,
          seed: 42,
        };
        const first = await a.completions.create(req);
        const again = await a.completions.create(req);
        assert.equal(first.object, "text_completion");
        assert.deepEqual(first.choices.map((c) => c.index), [0, 1, 2]);
        assert.deepEqual(again.choices.map((c) => c.text), first.choices.map((c) => c.text));
        assert.equal(new Set(first.choices.map((c) => c.text)).size, 3, "choices draw differently");
        const other = await a.completions.create({ ...req, seed: 43 });
        assert.notDeepEqual(other.choices.map((c) => c.text), first.choices.map((c) => c.text));
        assert.equal(
          first.usage?.prompt_tokens,
          (await a.completions.create({ ...req, n: 1 })).usage?.prompt_tokens,
        );

        const stream = await a.completions.create({
          ...req,
          stream: true,
          stream_options: { include_usage: true },
        });
        const texts = ["", "", ""];
        const finish: (string | null)[] = [null, null, null];
        let usage;
        for await (const chunk of stream) {
          if (chunk.usage) usage = chunk.usage;
          for (const c of chunk.choices) {
            texts[c.index] += c.text;
            if (c.finish_reason) finish[c.index] = c.finish_reason;
          }
        }
        assert.deepEqual(texts, first.choices.map((c) => c.text));
        assert.deepEqual(finish, first.choices.map((c) => c.finish_reason));
        assert.deepEqual(usage, first.usage);
        longText = first.choices.find((c) => c.finish_reason === "length")?.text ?? "";
      },
    );

    await t.step("stop strings end a choice before the stop, streamed or not", async () => {
      const base = { model: `job:${jobA}@2`, prompt: fx.prompt + "\n", max_tokens: 40, seed: 42 };
      const full = await a.completions.create({ ...base, temperature: 1, n: 3 });
      const text = full.choices.map((c) => c.text).find((x) => x.trim().length >= 12)!;
      assert.ok(text, `a long enough choice: ${JSON.stringify(full.choices.map((c) => c.text))}`);
      const index = full.choices.findIndex((c) => c.text === text);
      const stop = text.trim().slice(6, 10);
      const cut = text.slice(0, text.indexOf(stop));
      const r = await a.completions.create({
        ...base,
        temperature: 1,
        n: 3,
        stop: [stop, "\u0007"],
      });
      assert.equal(r.choices[index].text, cut);
      assert.equal(r.choices[index].finish_reason, "stop");
      assert.ok(r.usage!.completion_tokens < full.usage!.completion_tokens);
      const stream = await a.completions.create({
        ...base,
        temperature: 1,
        n: 3,
        stop,
        stream: true,
      });
      let streamed = "";
      for await (const chunk of stream) {
        for (const c of chunk.choices) if (c.index === index) streamed += c.text;
      }
      assert.equal(streamed, cut, "no part of the stop string was streamed");
      assert.ok(longText.length > 0);
    });

    await t.step(
      "streamed chat opens with the assistant role and ends with [DONE] (curl)",
      async () => {
        const body = JSON.stringify({
          model: `job:${jobA}`,
          messages: [{ role: "user", content: fx.prompt }],
          max_tokens: 8,
          temperature: 0,
          stream: true,
        });
        const out = await new Deno.Command("curl", {
          args: [
            "-sN",
            "-H",
            `authorization: Bearer ${fx.keyA}`,
            "-H",
            "content-type: application/json",
            "-d",
            body,
            `${baseURL}/chat/completions`,
          ],
          stdout: "piped",
        }).output();
        const lines = new TextDecoder().decode(out.stdout).split("\n").filter((l) =>
          l.startsWith("data: ")
        );
        assert.equal(lines.at(-1), "data: [DONE]");
        const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.slice(6)));
        assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
        assert.ok(chunks.every((c) => c.object === "chat.completion.chunk"));
        const content = chunks.map((c) => c.choices[0].delta.content ?? "").join("");
        const plain = await a.chat.completions.create({
          model: `job:${jobA}`,
          messages: [{ role: "user", content: fx.prompt }],
          max_tokens: 8,
          temperature: 0,
        });
        assert.equal(content, plain.choices[0].message.content);
        assert.ok(["stop", "length"].includes(chunks.at(-1).choices[0].finish_reason));
      },
    );

    await t.step(
      'skills: "library" puts the best skill for the task into the prompt and names it',
      async () => {
        const r = await a.chat.completions.create({
          model: `job:${jobA}`,
          messages: [{ role: "user", content: fx.prompt }],
          temperature: 0,
          max_tokens: 16,
          // @ts-expect-error: our extension field
          skills: "library",
        });
        const skill = (r as unknown as { skill: Record<string, unknown> }).skill;
        assert.equal(skill.text, SKILLS[2].text, "all task words (push, box, onto, target) match");
        assert.equal(skill.library_step, 2);
        assert.equal(skill.relevance, 1);
        assert.deepEqual([skill.success_count, skill.failure_count, skill.times_seen], [1, 1, 2]);
        const trainer = await trainerPolicy(fx, jobA, 2);
        const withSkill = insertSkill(fx.prompt, SKILLS[2].text);
        const expected = await trainer.text.generate([withSkill], {
          maxNewTokens: 16,
          temperature: 0,
          seed: 0,
        });
        assert.equal((r.choices[0].message.content ?? "").trim(), expected.texts[0]);
        assert.equal(r.usage?.prompt_tokens, trainer.text.promptIds(withSkill).length);
        await trainer.text.policy.release();

        const noSkill = await a.chat.completions.create({
          model: `job:${jobA}`,
          messages: [{ role: "user", content: fx.prompt }],
          max_tokens: 1,
        });
        assert.equal(noSkill.usage!.prompt_tokens < r.usage!.prompt_tokens, true);
        assert.equal("skill" in noSkill, false);
        const missing = await post(
          "/completions",
          JSON.stringify({ model: `job:${jobA}`, prompt: fx.prompt, skills: { step: 0 } }),
        );
        assert.equal(missing.status, 400);
        assert.equal(missing.body.error.param, "skills");
      },
    );

    await t.step("keys: none, malformed or revoked → 401; another tenant's job → 404", async () => {
      const none = await fetch(`${baseURL}/models`);
      assert.equal(none.status, 401);
      assert.equal((await none.json()).error.code, "invalid_api_key");
      const bad = await apiError(client("sk-not-ours").models.list());
      assert.equal(bad.status, 401);
      const other = await apiError(
        client(fx.keyB).chat.completions.create({
          model: `job:${jobA}`,
          messages: [{ role: "user", content: "hi" }],
        }),
      );
      assert.equal(other.status, 404);
      assert.equal(other.code, "model_not_found");
      assert.equal(other.param, "model");
      const retrieve = await apiError(client(fx.keyB).models.retrieve(`job:${jobA}`));
      assert.equal(retrieve.status, 404);
      const { createKey } = await import("../../../jobs/mod.ts");
      const extra = await createKey(fx.db, fx.tenantA.name);
      await client(extra.key).models.list();
      await revokeKey(fx.db, extra.info.id);
      assert.equal((await apiError(client(extra.key).models.list())).status, 401);
    });

    await t.step("bad input gets a 4xx in OpenAI's error shape naming the field", async () => {
      const model = `job:${jobA}`;
      const messages = [{ role: "user", content: "Your task is to: push" }];
      const cases: [string, unknown, number, string | null][] = [
        ["/chat/completions", { model, messages, temperature: 5 }, 400, "temperature"],
        ["/chat/completions", { model }, 400, "messages"],
        [
          "/chat/completions",
          { model, messages: [{ role: "tool", content: "x" }] },
          400,
          "messages.0.role",
        ],
        ["/chat/completions", { model, messages, n: 17 }, 400, "n"],
        ["/chat/completions", { model, messages, top_p: 0 }, 400, "top_p"],
        ["/chat/completions", { model, messages, tools: [{ type: "function" }] }, 400, "tools"],
        ["/chat/completions", { model, messages, tempreature: 1 }, 400, null],
        ["/chat/completions", { model, messages, max_tokens: 5000 }, 400, "max_tokens"],
        ["/chat/completions", { model: "gpt-4o", messages }, 404, "model"],
        ["/chat/completions", { model: `job:${jobA}@7`, messages }, 404, "model"],
        ["/completions", { model, prompt: "" }, 400, "prompt"],
        ["/completions", { model, prompt: ["a", "b"] }, 400, "prompt"],
        ["/completions", { model, prompt: "x", stop: ["a", "b", "c", "d", "e"] }, 400, "stop"],
      ];
      for (const [path, body, status, param] of cases) {
        const r = await post(path, JSON.stringify(body));
        assert.equal(r.status, status, `${JSON.stringify(body)} → ${JSON.stringify(r.body)}`);
        assert.deepEqual(Object.keys(r.body.error).sort(), ["code", "message", "param", "type"]);
        assert.equal(r.body.error.type, "invalid_request_error");
        if (param !== null) assert.equal(r.body.error.param, param, JSON.stringify(r.body));
      }
      const unknownField = await post(
        "/chat/completions",
        JSON.stringify({ model, messages, tempreature: 1 }),
      );
      assert.match(unknownField.body.error.message, /tempreature/);
      assert.equal(unknownField.body.error.param, "tempreature");
      const context = await post(
        "/chat/completions",
        JSON.stringify({ model, messages, max_tokens: 5000 }),
      );
      assert.equal(context.body.error.code, "context_length_exceeded");
      // A completions prompt past the context names `prompt`, not `messages`.
      const longPrompt = await post(
        "/completions",
        JSON.stringify({ model, prompt: "a b ".repeat(3000), max_tokens: 1 }),
      );
      assert.equal(longPrompt.body.error.code, "context_length_exceeded");
      assert.equal(longPrompt.body.error.param, "prompt");
      // ~720 KB of text (4 messages of 180,000 characters) is refused by its length, before
      // tokenizing (which would stall every stream for seconds): the message counts characters, not
      // tokens.
      const huge = await post(
        "/chat/completions",
        JSON.stringify({
          model,
          messages: Array.from(
            { length: 4 },
            () => ({ role: "user", content: "ab ".repeat(60_000) }),
          ),
        }),
      );
      assert.equal(huge.status, 400, JSON.stringify(huge.body));
      assert.equal(huge.body.error.code, "context_length_exceeded", huge.body.error.message);
      assert.equal(huge.body.error.param, "messages");
      assert.match(
        huge.body.error.message,
        /\d+ characters: at least \d+ tokens, as no token is longer than \d+ characters/,
      );
      // An empty prompt is refused with or without a skill to insert.
      const empty = await post(
        "/completions",
        JSON.stringify({ model, prompt: "", skills: "library", max_tokens: 1 }),
      );
      assert.equal(empty.status, 400);
      assert.equal(empty.body.error.param, "prompt");
      const notJson = await post("/chat/completions", "{not json");
      assert.equal(notJson.status, 400);
      assert.match(notJson.body.error.message, /JSON/);
      const big = await post(
        "/completions",
        JSON.stringify({ model, prompt: "x".repeat(2 * 1024 * 1024) }),
      );
      assert.equal(big.status, 413);
      const route = await fetch(`${baseURL}/embeddings`, {
        method: "POST",
        headers: { authorization: `Bearer ${fx.keyA}` },
      });
      assert.equal(route.status, 404);
      assert.equal((await route.json()).error.type, "invalid_request_error");
      // A known URL with another method is a 405 naming the one it takes, as the job API answers.
      const wrong = await fetch(`${baseURL}/chat/completions`, {
        headers: { authorization: `Bearer ${fx.keyA}` },
      });
      assert.equal(wrong.status, 405);
      assert.equal(wrong.headers.get("allow"), "POST");
      assert.match((await wrong.json()).error.message, /takes only POST/);
      // A JSON body sent under another Content-Type is a 415, as the job API answers.
      for (const type of ["text/plain", undefined]) {
        const plain = await fetch(`${baseURL}/chat/completions`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${fx.keyA}`,
            ...(type ? { "content-type": type } : {}),
          },
          body: new Blob([JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] })]),
        });
        const problem = await plain.json();
        assert.equal(plain.status, 415, JSON.stringify(problem));
        assert.equal(problem.error.code, "unsupported_media_type");
        assert.match(problem.error.message, /Content-Type must be application\/json/);
      }
      // A trailing slash is another URL (the router matches exact paths): a 404, never a 405
      // that says the URL takes the very method the request used.
      for (
        const [method, path] of [["POST", "/chat/completions/"], ["POST", "/completions/"], [
          "GET",
          "/models/",
        ]]
      ) {
        const slash = await fetch(`${baseURL}${path}`, {
          method,
          headers: { authorization: `Bearer ${fx.keyA}` },
        });
        assert.equal(slash.status, 404, `${method} ${path}`);
        assert.equal(slash.headers.get("allow"), null);
        assert.match((await slash.json()).error.message, /Unknown request URL/);
      }
    });

    await t.step("a checkpoint whose object was corrupted is refused, not served", async () => {
      const job = await jobWithCheckpoints(fx, fx.tenantA, { steps: [0], seed: 4 });
      const ck = (await getCheckpoint(fx.db, job, 0))!;
      const weights = ck.files.find((f) => f.name === "model.safetensors")!;
      const bytes = await fx.s3.store.get(weights.key);
      bytes[bytes.length - 1] ^= 0xff; // one flipped bit pattern in the last weight
      await fx.s3.store.put(weights.key, bytes);
      for (let i = 0; i < 2; i++) {
        const e = await apiError(
          a.chat.completions.create({
            model: `job:${job}`,
            messages: [{ role: "user", content: "x" }],
          }),
        );
        assert.equal(e.status, 502);
        assert.equal(e.code, "checkpoint_integrity");
        assert.match(e.message, /SHA-256/);
        // Names the file, never the object key (it holds the tenant id).
        assert.doesNotMatch(e.message, /tenants\//);
      }
    });
  } finally {
    await server.stop();
    await fx.close();
  }
});
