/**
 * An `sft` job whose analyzer warm-up is labelled by an LLM annotator: the real worker (the
 * trainer in its compute process) calls a real HTTP server on loopback that speaks the
 * chat-completions shape, with the tenant secret (stored encrypted) as the bearer key. Every other
 * answer is unparseable: only the parsed labels are trained on, and the parse rate is reported as
 * a metric and in the warm-up event. The annotator is probed with one request when the job
 * starts: a refused key, or a URL where nothing listens, fails the job before the policy warm-up
 * (no warm-up event, no step-0 metrics), with an error that does not hold the key.
 */
import assert from "node:assert/strict";
import {
  getJob,
  type JobEvent,
  listEvents,
  putSecret,
  SecretCipher,
} from "../../../../jobs/mod.ts";
import { ANNOTATOR_PROBE_PROMPT } from "../../../../workers/seed/annotator.ts";
import { createTenant, openTestDatabase } from "../../../_harness/fixtures.ts";
import { startTestStore } from "../../../_harness/s3.ts";
import { type ChatAnswer, startChatServer } from "../_chat_server.ts";
import { metricsByStep, runOne, submit, testWorker, tinySpec, trainerRegistry } from "../_jobs.ts";

const KEY_HEX = "3c".repeat(32);
const API_KEY = "sk-annotator-51e0c7d2b9";
const GOOD = '{"episode_skill": "Push the box up, then left.", "episode_summary": "two pushes"}';

/** Sets process environment variables (the compute process inherits them); returns a restore. */
function setEnv(vars: Record<string, string>): () => void {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  for (const [k, v] of Object.entries(vars)) Deno.env.set(k, v);
  return () => {
    for (const [k, v] of Object.entries(before)) {
      v === undefined ? Deno.env.delete(k) : Deno.env.set(k, v);
    }
  };
}

function annotatorSpec(baseUrl: string) {
  return tinySpec({
    method: "sft",
    warmup: {
      policy: { episodes: 1, epochs: 1, batch_size: 8 },
      analyzer: {
        episodes: 4,
        epochs: 1,
        batch_size: 8,
        annotator: {
          base_url: baseUrl,
          model: "annotator-large",
          credential_secret: "annotator",
          concurrency: 2,
          max_retries: 0,
        },
      },
    },
    eval: { episodes: 1, splits: ["test_seen"] },
  });
}

/** No warm-up stage ran: no `warmup` event, and progress never reached `warmup_policy`. */
function assertNoWarmup(events: JobEvent[]): void {
  assert.deepEqual(events.filter((e) => e.type === "warmup"), []);
  assert.ok(!JSON.stringify(events).includes("warmup_policy"), JSON.stringify(events));
}

Deno.test("an LLM annotator labels the analyzer warm-up of a job", async (t) => {
  const restore = setEnv({
    SEED_SECRETS_KEY: KEY_HEX,
    SEED_ANNOTATOR_ALLOWED_HOSTS: "127.0.0.1",
  });
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const cipher = new SecretCipher(KEY_HEX);
  const tenantId = await createTenant(db);
  await putSecret(db, cipher, { tenantId, name: "annotator", value: API_KEY });
  let answered = 0;
  let refuse = false;
  const server = startChatServer((prompt): ChatAnswer =>
    refuse
      ? { status: 401, body: { error: { message: `Incorrect API key provided: ${API_KEY}` } } }
      : prompt === ANNOTATOR_PROBE_PROMPT
      ? "OK"
      : ++answered % 2 === 1
      ? GOOD
      : "The agent should try harder."
  );
  const worker = testWorker(db, s3.store, trainerRegistry());
  try {
    await t.step("only parsed labels are trained on and the parse rate is reported", async () => {
      const job = await submit(db, tenantId, annotatorSpec(server.baseUrl));
      const result = await runOne(worker);
      const row = await getJob(db, { tenantId, jobId: job.id });
      assert.equal(result, "succeeded", row?.error ?? "");
      const m = (await metricsByStep(db, job.id)).get(0)!;
      assert.equal(m.warmup_analyzer_annotator_requests, 4);
      assert.equal(m.warmup_analyzer_annotator_answered, 4);
      assert.equal(m.warmup_analyzer_annotator_parsed, 2);
      assert.equal(m.warmup_analyzer_annotator_failed, 0);
      assert.equal(m.warmup_analyzer_annotator_parse_rate, 0.5);
      assert.equal(m.warmup_analyzer_analyses, 2);
      const events = await listEvents(db, job.id, { limit: 1000 });
      const data = events.filter((e) => e.type === "warmup").map((e) =>
        e.data as Record<string, unknown>
      );
      const analyzer = data.find((d) => d.stage === "warmup_analyzer");
      assert.equal(analyzer?.annotator_parse_rate, 0.5);
      assert.equal(analyzer?.annotator_parsed, 2);
      assert.ok(!JSON.stringify(events).includes(API_KEY));
      assert.ok(!JSON.stringify(row).includes(API_KEY));
      // What the server saw: the probe first, then the analyzer prompts as user messages, each
      // with the key as the bearer token.
      assert.equal(server.requests.length, 5);
      const [probe, ...labels] = server.requests;
      assert.equal(probe.body.messages[0].content, ANNOTATOR_PROBE_PROMPT);
      assert.equal(probe.authorization, `Bearer ${API_KEY}`);
      for (const r of labels) {
        assert.equal(r.authorization, `Bearer ${API_KEY}`);
        assert.equal(r.body.model, "annotator-large");
        assert.match(r.body.messages[0].content, /^Analyze the agent episode below\./);
        assert.match(r.body.messages[0].content, /Outcome: (success|failure)/);
      }
    });

    await t.step(
      "a refused key fails the job before the policy warm-up without echoing the key",
      async () => {
        refuse = true;
        const seen = server.requests.length;
        const job = await submit(db, tenantId, annotatorSpec(server.baseUrl));
        assert.equal(await runOne(worker), "failed");
        const row = await getJob(db, { tenantId, jobId: job.id });
        assert.match(
          row?.error ?? "",
          /^AnnotatorError: Cannot use warmup\.analyzer\.annotator as annotator-large/,
        );
        assert.match(row?.error ?? "", /401/);
        assert.match(row?.error ?? "", /Incorrect API key provided: \[secret\]/);
        assert.ok(!JSON.stringify(row).includes(API_KEY));
        const events = await listEvents(db, job.id, { limit: 1000 });
        assert.ok(!JSON.stringify(events).includes(API_KEY));
        assertNoWarmup(events);
        assert.equal((await metricsByStep(db, job.id)).size, 0);
        // Only the probe was sent.
        assert.equal(server.requests.length, seen + 1);
      },
    );

    await t.step(
      "a URL where nothing listens fails the job before the policy warm-up",
      async () => {
        const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const port = (closed.addr as Deno.NetAddr).port;
        closed.close();
        const job = await submit(db, tenantId, annotatorSpec(`http://127.0.0.1:${port}/v1`));
        assert.equal(await runOne(worker), "failed");
        const row = await getJob(db, { tenantId, jobId: job.id });
        assert.match(
          row?.error ?? "",
          new RegExp(
            `^AnnotatorError: Cannot use warmup\\.analyzer\\.annotator as annotator-large at http://127\\.0\\.0\\.1:${port}/v1 must answer a chat completion before the warm-up starts: Connection error`,
          ),
        );
        assertNoWarmup(await listEvents(db, job.id, { limit: 1000 }));
        assert.equal((await metricsByStep(db, job.id)).size, 0);
      },
    );
  } finally {
    restore();
    await server.close();
    await s3.close();
    await close();
  }
});
