/**
 * The LLM annotator against a real HTTP server on loopback that speaks the chat-completions shape,
 * through the real `openai` client: labels kept only where they parse, the parse rate, the bearer
 * key sent and never echoed in errors, retries, and the URL rules (loopback refused unless the
 * operator lists it; public names that resolve to internal addresses refused).
 */
import assert from "node:assert/strict";
import type { Trajectory } from "../../../workers/envs/types.ts";
import {
  annotateTrajectories,
  ANNOTATOR_PROBE_PROMPT,
  AnnotatorError,
  type AnnotatorSpec,
  probeAnnotator,
  scrub,
} from "../../../workers/seed/annotator.ts";
import { buildAnalyzerPrompt } from "../../../workers/skills/mod.ts";
import { type ChatAnswer, startChatServer } from "./_chat_server.ts";

const KEY = "sk-test-7f3c9a1e55b2";
const LOOPBACK = ["127.0.0.1"];

function trajectory(i: number, won: boolean): Trajectory {
  return {
    task: {
      envId: "sokoban",
      id: `sokoban/train/${i}`,
      split: "train",
      seed: i,
      family: "sokoban",
      instruction: `push the box onto target ${i}`,
      options: {},
    },
    steps: [
      {
        observation: `room ${i}`,
        response: "<action>up</action>",
        action: "up",
        valid: true,
        reward: 0,
      },
    ],
    won,
    score: won ? 10 : 0,
  };
}

function spec(baseUrl: string, overrides: Partial<AnnotatorSpec> = {}): AnnotatorSpec {
  return {
    base_url: baseUrl,
    model: "annotator-large",
    credential_secret: "annotator-key",
    max_tokens: 300,
    temperature: 0,
    concurrency: 2,
    timeout_s: 30,
    max_retries: 0,
    ...overrides,
  };
}

/** Answers by the task number in the prompt: 3 of 5 parse (one only leniently). */
const ANSWERS: Record<number, string> = {
  0: '{"episode_skill": "Push the box up before walking left.", "episode_summary": "won in 3"}',
  1: '```json\n{"episode_skill": "Never push a box into a corner",}\n```',
  2: "I am sorry, I cannot analyze this episode.",
  3: '{"episode_summary": "the agent walked around"}',
  4: 'Here it is: {"episode_skill": "Walk left, then push right."}',
};
const taskOf = (prompt: string) => Number(/onto target (\d+)/.exec(prompt)![1]);

Deno.test("only parseable labels are kept and the parse rate counts them", async () => {
  const server = startChatServer((prompt) => ANSWERS[taskOf(prompt)]);
  try {
    const trajectories = [0, 1, 2, 3, 4].map((i) => trajectory(i, i % 2 === 0));
    const prompt = { maxSteps: 4, maxFieldChars: 64 };
    const out = await annotateTrajectories(trajectories, {
      spec: spec(server.baseUrl),
      apiKey: KEY,
      prompt,
      allowedHosts: LOOPBACK,
    });
    assert.deepEqual(out.report, {
      requests: 5,
      answered: 5,
      parsed: 3,
      failed: 0,
      parseRate: 0.6,
    });
    assert.deepEqual(out.labels, [
      { episode_skill: "Push the box up before walking left.", episode_summary: "won in 3" },
      { episode_skill: "Never push a box into a corner", episode_summary: "" },
      null,
      null,
      { episode_skill: "Walk left, then push right.", episode_summary: "" },
    ]);
    assert.equal(out.raw[2], ANSWERS[2]);
    // Every request: the analyzer prompt as the user message, the key as the bearer token.
    assert.equal(server.requests.length, 5);
    const byTask = new Map(server.requests.map((r) => [taskOf(r.body.messages[0].content), r]));
    for (const [i, t] of trajectories.entries()) {
      const r = byTask.get(i)!;
      assert.equal(r.authorization, `Bearer ${KEY}`);
      assert.deepEqual(r.body.messages, [{
        role: "user",
        content: buildAnalyzerPrompt(t, prompt),
      }]);
      assert.equal(r.body.model, "annotator-large");
      assert.equal(r.body.max_tokens, 300);
      assert.equal(r.body.temperature, 0);
    }
  } finally {
    await server.close();
  }
});

Deno.test("a 5xx answer is retried and then labelled", async () => {
  let calls = 0;
  const server = startChatServer((prompt): ChatAnswer =>
    ++calls === 1
      ? { status: 503, body: { error: { message: "overloaded" } } }
      : ANSWERS[taskOf(prompt)]
  );
  try {
    const out = await annotateTrajectories([trajectory(0, true)], {
      spec: spec(server.baseUrl, { max_retries: 1, concurrency: 1 }),
      apiKey: KEY,
      allowedHosts: LOOPBACK,
    });
    assert.equal(server.requests.length, 2);
    assert.deepEqual(out.report, { requests: 1, answered: 1, parsed: 1, failed: 0, parseRate: 1 });
  } finally {
    await server.close();
  }
});

Deno.test("a refused key stops the annotation and the error never holds the key", async () => {
  const server = startChatServer(() => ({
    status: 401,
    body: {
      error: { message: `Incorrect API key provided: ${KEY}`, type: "invalid_request_error" },
    },
  }));
  try {
    const error = await annotateTrajectories([0, 1, 2].map((i) => trajectory(i, false)), {
      spec: spec(server.baseUrl, { concurrency: 1 }),
      apiKey: KEY,
      allowedHosts: LOOPBACK,
    }).then(() => null, (e) => e);
    assert.ok(error instanceof AnnotatorError);
    assert.match(error.message, /401/);
    assert.match(error.message, /Incorrect API key provided: \[secret\]/);
    assert.ok(!error.message.includes(KEY));
    assert.equal(server.requests.length, 1, "a 401 is not repeated for the other trajectories");
  } finally {
    await server.close();
  }
});

Deno.test("when every request fails the annotation fails", async () => {
  const server = startChatServer(() => ({ status: 500, body: { error: { message: "down" } } }));
  try {
    await assert.rejects(
      annotateTrajectories([trajectory(0, true), trajectory(1, false)], {
        spec: spec(server.baseUrl),
        apiKey: KEY,
        allowedHosts: LOOPBACK,
      }),
      (e) => e instanceof AnnotatorError && /500/.test(e.message),
    );
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});

Deno.test("loopback is refused unless the operator lists it, and nothing is sent", async () => {
  const server = startChatServer(() => ANSWERS[0]);
  try {
    await assert.rejects(
      annotateTrajectories([trajectory(0, true)], {
        spec: spec(server.baseUrl),
        apiKey: KEY,
        allowedHosts: [],
      }),
      (e) =>
        e instanceof AnnotatorError &&
        /warmup\.analyzer\.annotator\.base_url as its host must be public/.test(e.message),
    );
    assert.equal(server.requests.length, 0);
  } finally {
    await server.close();
  }
});

Deno.test("a public name that resolves to an internal address is refused", async () => {
  const resolved: string[] = [];
  await assert.rejects(
    annotateTrajectories([trajectory(0, true)], {
      spec: spec("https://annotator.example.com/v1"),
      apiKey: KEY,
      allowedHosts: [],
      resolve: (host) => {
        resolved.push(host);
        return Promise.resolve(["93.184.215.14", "10.1.2.3"]);
      },
    }),
    (e) => e instanceof AnnotatorError && /it resolves to 10\.1\.2\.3/.test(e.message),
  );
  assert.deepEqual(resolved, ["annotator.example.com"]);
});

Deno.test("the probe sends one short request and fails on a refused key, a dead port or a refused URL", async () => {
  let refuse = false;
  const server = startChatServer((): ChatAnswer =>
    refuse ? { status: 404, body: { error: { message: `model not found (key ${KEY})` } } } : "OK"
  );
  try {
    await probeAnnotator({ spec: spec(server.baseUrl), apiKey: KEY, allowedHosts: LOOPBACK });
    assert.equal(server.requests.length, 1);
    const [probe] = server.requests;
    assert.equal(probe.authorization, `Bearer ${KEY}`);
    assert.equal(probe.body.model, "annotator-large");
    assert.deepEqual(probe.body.messages, [{ role: "user", content: ANNOTATOR_PROBE_PROMPT }]);
    assert.equal(probe.body.max_tokens, 16);

    refuse = true;
    const refused = await probeAnnotator({
      spec: spec(server.baseUrl),
      apiKey: KEY,
      allowedHosts: LOOPBACK,
    }).catch((e) => e);
    assert.ok(refused instanceof AnnotatorError);
    assert.match(
      refused.message,
      /^Cannot use warmup\.analyzer\.annotator as annotator-large at .* must answer a chat completion before the warm-up starts: 404/,
    );
    assert.ok(!refused.message.includes(KEY));

    const before = server.requests.length;
    await assert.rejects(
      probeAnnotator({ spec: spec(server.baseUrl), apiKey: KEY, allowedHosts: [] }),
      /must answer a chat completion before the warm-up starts: .*SEED_ANNOTATOR_ALLOWED_HOSTS/,
    );
    assert.equal(server.requests.length, before);
  } finally {
    await server.close();
  }
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  await assert.rejects(
    probeAnnotator({
      spec: spec(`http://127.0.0.1:${port}/v1`),
      apiKey: KEY,
      allowedHosts: LOOPBACK,
    }),
    /before the warm-up starts: Connection error/,
  );
});

Deno.test("scrub removes a key echoed raw, JSON-escaped (once or twice) or percent-encoded", () => {
  const key = 'sk-q"uote\\back-LEAKME 42';
  const echoes = [
    `401 ${key}`,
    `401 ${JSON.stringify({ error: { provided: key } })}`,
    `401 ${JSON.stringify(JSON.stringify({ provided: key }))}`,
    `401 https://x/?k=${encodeURIComponent(key)}`,
  ];
  for (const echo of echoes) {
    const out = scrub(echo, key);
    assert.ok(!out.includes("LEAKME"), out);
    assert.match(out, /\[secret\]/);
  }
});
