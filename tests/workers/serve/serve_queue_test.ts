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
const twoSteps = await jobWithCheckpoints(fx, fx.tenantA, { steps: [0, 2] });

/**
 * A server with one decode slot and one queue place, whose loop waits for `gate` before each
 * step once `close()` was called or `closeAfter` steps have run.
 */
function gatedServer(closeAfter = Infinity, maxModels = 4, maxBatch = 1) {
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
    SERVE_MAX_BATCH: maxBatch,
    SERVE_MAX_QUEUE: 1,
    SERVE_MAX_MODELS: maxModels,
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

/** Until `done()` holds (checked every 5 ms, at most 5 s). */
async function until(done: () => boolean, what: string) {
  for (let i = 0; !done(); i++) {
    if (i === 1000) throw new Error(`Cannot wait longer for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function evictWhileDecoding() {
  const s = gatedServer(4, 1); // one checkpoint kept; the loop holds before its 4th step
  try {
    const { registry } = s.server;
    /** Holds a checkpoint a moment to count its session's releases. */
    const spy = async (step: number) => {
      const held = await registry.acquire(
        await registry.resolve(fx.tenantA.id, `job:${twoSteps}@${step}`),
      );
      const session = held.model.session, release = session.release.bind(session);
      const calls = { n: 0 };
      session.release = () => (calls.n++, release());
      held.release();
      return calls;
    };
    const first = await spy(0);
    const req = {
      model: `job:${twoSteps}@0`,
      messages: [{ role: "user" as const, content: fx.prompt }],
      max_tokens: 40,
      temperature: 0,
    };
    const stream = await s.client.chat.completions.create({ ...req, stream: true });
    let text = "", finish: string | null = null, evicted = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (text !== "" && !evicted) {
        evicted = true;
        // mid-stream: loading step 2 drops step 0 from the LRU while the stream decodes on it
        assert.equal(s.server.engine.active, 1, "the stream is decoding");
        const second = await spy(2);
        assert.equal(registry.retiring, 1);
        assert.equal(first.n, 0, "a session in use is not released");
        s.open();
        await until(() => second.n === 0 && registry.size === 1, "step 2 in the LRU");
      }
    }
    assert.equal(finish, "length");
    await until(() => first.n === 1, "step 0's session released after its stream");
    assert.equal(registry.retiring, 0);
    // the stream decoded to the end on the dropped checkpoint: as a fresh load of it does
    const again = await s.client.chat.completions.create(req);
    assert.equal(text, again.choices[0].message.content);
    assert.equal(again.usage?.completion_tokens, 40);
  } finally {
    s.open();
    await s.server.stop();
  }
}

/**
 * A checkpoint evicted while a stream decodes on it, then loaded again for a second request that
 * joins the same decode loop: the two loaded copies never share a batch, so releasing the evicted
 * copy's session when the first stream ends cannot fail the second (it did: "Session already
 * disposed" as a 500 mid-decode).
 */
async function reloadWhileDecoding() {
  const s = gatedServer(4, 1, 2); // one checkpoint kept, two decode slots
  try {
    const { registry } = s.server;
    const req = (max_tokens: number) => ({
      model: `job:${twoSteps}@0`,
      messages: [{ role: "user" as const, content: fx.prompt }],
      max_tokens,
      temperature: 0,
    });
    /** Loads step 2, evicting whatever copy of step 0 the LRU holds. */
    const evictStep0 = async () =>
      (await registry.acquire(await registry.resolve(fx.tenantA.id, `job:${twoSteps}@2`)))
        .release();
    const stream = await s.client.chat.completions.create({ ...req(60), stream: true });
    let text = "", second: Promise<OpenAI.ChatCompletion> | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (text !== "" && second === undefined) {
        await evictStep0(); // the stream's copy of step 0 is now retiring
        second = s.client.chat.completions.create(req(8)); // loads a second copy of step 0
        await until(() => s.server.engine.waiting === 1, "the second request queued");
        await evictStep0(); // the second copy retires too: freed when its 8 tokens are done
        s.open();
      }
    }
    assert.equal(text.length > 0, true);
    const b = await second!;
    assert.equal(b.usage?.completion_tokens, 8);
    assert.ok(text.startsWith(b.choices[0].message.content!), "greedy: the same start");
    const again = await s.client.chat.completions.create(req(60));
    assert.equal(text, again.choices[0].message.content, "the stream ran to its end");
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
    await t.step(
      "a checkpoint dropped from the LRU keeps its session until its last stream ends, then frees it",
      evictWhileDecoding,
    );
    await t.step(
      "a checkpoint reloaded while its evicted copy still decodes gets a batch of its own",
      reloadWhileDecoding,
    );
  } finally {
    await fx.close();
  }
});
