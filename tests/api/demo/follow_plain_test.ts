import assert from "node:assert/strict";
import { appendEvent, fenceOf, setProgress, succeedJob } from "../../../jobs/mod.ts";
import { SeedClient } from "../../../api/client/mod.ts";
import { followJob } from "../../../api/demo/progress.ts";
import { serveApi } from "../../../api/main.ts";
import { claimAs, startApiFixture } from "../_fixture.ts";

const fx = await startApiFixture();
const serverEnv = { ...fx.s3Env, DATABASE_URL: fx.url, SEED_SECRETS_KEY: "5a".repeat(32) };
for (const [k, v] of Object.entries(serverEnv)) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const client = new SeedClient({ baseUrl: `http://127.0.0.1:${api.port}`, apiKey: fx.keyA });

Deno.test("off a terminal the demo's progress names each stage and status once, not twice", async () => {
  const submitted = await client.submit({ env: { id: "sokoban" }, priority: 1000 });
  const job = await claimAs(fx.db, String(submitted.id));
  const fence = fenceOf(job);
  for (const stage of ["warmup_policy", "rollout"]) {
    await setProgress(fx.db, fence, { stage, step: 0, totalSteps: 2 });
    await appendEvent(fx.db, fence, "stage", { stage });
  }
  await appendEvent(fx.db, fence, "eval", { step: 0, split: "test_seen", success_rate: 0.25 });
  let out = "";
  const following = followJob(client, job.id, {
    io: { tty: false, write: (t) => void (out += t) },
  });
  await succeedJob(fx.db, fence);
  const final = await following;
  assert.equal(final.status, "succeeded");
  const lines = out.trim().split("\n");
  assert.ok(lines.includes("eval at step 0: test_seen success 25%"), out);
  // However the job's progress and the replayed events interleave, no status or stage is named
  // both by an event line and by a progress line: each shows once, as the event (an earlier one)
  // or in the progress line (the current one).
  const progressLines = lines.filter((l) => !/^(status|stage|eval)/.test(l));
  for (
    const [kind, word] of [
      ["status", "queued"],
      ["status", "running"],
      ["status", "succeeded"],
      ["stage", "warmup_policy"],
      ["stage", "rollout"],
    ]
  ) {
    const asEvent = lines.filter((l) => l === `${kind}: ${word}`).length;
    const inProgress = progressLines.some((l) => l.split(/\s+/).includes(word)) ? 1 : 0;
    assert.equal(asEvent + inProgress, 1, `${kind} ${word}:\n${out}`);
  }
});

Deno.test({
  name: "stop the plain-progress test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
