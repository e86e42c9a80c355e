/**
 * SSE clients that disconnect mid-stream leave nothing behind: every LISTEN subscription an event
 * stream took is released, and the server shuts down with no stream still running.
 */
import assert from "node:assert/strict";
import { createApp } from "../../api/app.ts";
import type { Database } from "../../jobs/mod.ts";
import { runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

/** The fixture's database, counting live `listen` subscriptions; `idle` resolves at zero. */
function countingDb(db: Database) {
  let live = 0;
  let taken = 0;
  let onZero: (() => void) | undefined;
  const counted: Database = {
    ...db,
    async listen(channel, onPayload) {
      const stop = await db.listen(channel, onPayload);
      live++;
      taken++;
      return async () => {
        await stop();
        live--;
        if (live === 0) onZero?.();
      };
    },
  };
  return {
    db: counted,
    live: () => live,
    taken: () => taken,
    idle: () => live === 0 ? Promise.resolve() : new Promise<void>((r) => (onZero = r)),
  };
}

Deno.test("200 SSE clients that disconnect after the first event release every subscription", async () => {
  const job = await runningJob(fx, fx.keyA);
  const counting = countingDb(fx.db);
  const app = createApp({ db: counting.db, store: fx.store, authCacheMs: 0 });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
  try {
    const url = `http://127.0.0.1:${server.addr.port}/v1/jobs/${job.id}/events`;
    const headers = { authorization: `Bearer ${fx.keyA}`, accept: "text/event-stream" };
    for (let round = 0; round < 4; round++) {
      await Promise.all(Array.from({ length: 50 }, async () => {
        const abort = new AbortController();
        const res = await fetch(url, { headers, signal: abort.signal });
        assert.equal(res.status, 200);
        const reader = res.body!.getReader();
        let seen = "";
        while (!seen.includes("event: status")) {
          seen += new TextDecoder().decode((await reader.read()).value);
        }
        abort.abort();
        await reader.cancel().catch(() => {});
      }));
    }
    await counting.idle();
    assert.equal(counting.taken(), 200);
    assert.equal(counting.live(), 0);
  } finally {
    await server.shutdown();
  }
});

Deno.test({ name: "SSE disconnect tests close their fixture", fn: async () => await fx.close() });
