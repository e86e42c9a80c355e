/**
 * The server's decode queue over real HTTP: a full queue answers 429 with `Retry-After` (the
 * openai client sees a RateLimitError), and a client that disconnects mid-stream frees its slot
 * for the next request. The engine loop is held with its `beforeStep` hook, never with sleeps.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { Release } from "../../../workers/serve/engine.ts";
import { startServer } from "../../../workers/serve/main.ts";
import { jobWithCheckpoints, startServeFixture } from "./_fixture.ts";

const fx = await startServeFixture();
const job = await jobWithCheckpoints(fx, fx.tenantA, { steps: [0] });

/**
 * A server with one decode slot and one queue place, whose loop waits for `gate` before each
 * step once `close()` was called or `closeAfter` steps have run.
 */
function gatedServer(closeAfter = Infinity) {
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => {};
  let steps = 0;
  const releases: Release[] = [];
  let onRelease: (() => void) | undefined;
  const server = startServer({
    db: fx.db,
    store: fx.s3.store,
    SERVE_PORT: 0,
    SERVE_THREADS: 1,
    SERVE_MAX_BATCH: 1,
    SERVE_MAX_QUEUE: 1,
    authCacheMs: 0,
    engine: {
      beforeStep: () => {
        if (++steps === closeAfter) gate = new Promise((r) => (open = r));
        return gate;
      },
      onRelease: (r) => {
        releases.push(r);
        onRelease?.();
      },
    },
  });
  return {
    server,
    releases,
    client: new OpenAI({
      apiKey: fx.keyA,
      baseURL: `http://127.0.0.1:${server.port}/v1`,
      maxRetries: 0,
    }),
    close() {
      gate = new Promise((r) => (open = r));
    },
    open: () => open(),
    /** Resolves at the next release. */
    nextRelease: () => new Promise<void>((r) => (onRelease = r)),
  };
}

async function queueFull() {
  const s = gatedServer();
  try {
    s.close();
    const req = {
      model: `job:${job}`,
      messages: [{ role: "user" as const, content: fx.prompt }],
      max_tokens: 3,
    };
    const first = s.client.chat.completions.create(req); // decoding (once the gate opens)
    const second = s.client.chat.completions.create(req); // waiting
    while (s.server.engine.waiting < 2) await new Promise((r) => setTimeout(r, 5));
    const refused = await s.client.chat.completions.create(req).then(
      () => null,
      (e) => e,
    );
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(refused.code, "rate_limit_exceeded");
    s.open();
    assert.equal((await first).choices.length, 1);
    assert.equal((await second).choices.length, 1);
    assert.equal((await s.client.chat.completions.create(req)).object, "chat.completion");
  } finally {
    s.open();
    await s.server.stop();
  }
}

async function disconnect() {
  const s = gatedServer(4); // the loop holds before its 4th step: 3 tokens are out
  try {
    const released = s.nextRelease();
    const abort = new AbortController();
    const stream = await s.client.chat.completions.create({
      model: `job:${job}`,
      messages: [{ role: "user", content: fx.prompt }],
      max_tokens: 1500, // greedy decoding of this checkpoint repeats one word to the limit
      temperature: 0,
      stream: true,
    }, { signal: abort.signal });
    let chunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) chunks++;
      if (chunks === 2) {
        abort.abort();
        break;
      }
    }
    assert.equal(s.server.engine.active, 1, "the stream still holds its slot");
    s.open();
    await released;
    assert.equal(s.releases.length, 1);
    assert.equal(s.releases[0].reason, "cancelled");
    assert.ok(s.releases[0].tokens < 1500, `${s.releases[0].tokens} tokens before the disconnect`);
    assert.equal(s.server.engine.active + s.server.engine.waiting, 0);
    // the one slot is free: the next request decodes
    const r = await s.client.chat.completions.create({
      model: `job:${job}`,
      messages: [{ role: "user", content: fx.prompt }],
      max_tokens: 2,
    });
    assert.equal(r.choices.length, 1);
  } finally {
    s.open();
    await s.server.stop();
  }
}

Deno.test("the decode queue over HTTP", async (t) => {
  try {
    await t.step("a full queue answers 429 with Retry-After and later requests succeed", queueFull);
    await t.step(
      "a client that disconnects mid-stream frees its slot at the next step",
      disconnect,
    );
  } finally {
    await fx.close();
  }
});
