/**
 * A worker never dies of a dependency's outage at start: started while Postgres (its own
 * throwaway cluster) or the S3 server is down, a real worker process (`workers/main.ts`) waits,
 * logs why, and runs a job once the dependency is back; a stop signal while it waits exits 0.
 * A bad setting (a bucket name under 3 characters) is one log line and exit 1, no stack trace.
 */
import assert from "node:assert/strict";
import { type Database, getJob, openDatabase, startLocalS3, submitJob } from "../../../jobs/mod.ts";
import { createTenant, testSpec } from "../../_harness/fixtures.ts";
import { startPostgres } from "../../../jobs/embedded/postgres_cluster.ts";

const WORKER = new URL("./_counting_worker.ts", import.meta.url).pathname;

/** A worker process whose JSON log lines are read as they come. */
function spawnWorker(env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", WORKER],
    env: { WORKER_POLL_MS: "100", REAPER_INTERVAL_MS: "200", LOG_LEVEL: "info", ...env },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  let notify = () => {};
  const reading = (async () => {
    let rest = "";
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      lines.push(...parts);
      notify();
    }
    if (rest) lines.push(rest);
    notify();
  })();
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    notify();
    return s;
  });
  return {
    child,
    lines,
    status,
    reading,
    /** Resolves with the first log line containing `text`; rejects when the process exits first. */
    async waitForLine(text: string): Promise<string> {
      for (;;) {
        const line = lines.find((l) => l.includes(text));
        if (line) return line;
        if (exited) {
          await reading;
          const again = lines.find((l) => l.includes(text));
          if (again) return again;
          throw new Error(`the worker exited before logging "${text}":\n${lines.join("\n")}`);
        }
        await new Promise<void>((r) => notify = r);
      }
    },
  };
}

/** Polls the job's status until it is final (a bound, not a measurement). */
async function finalStatus(db: Database, tenantId: string, jobId: string, exited: () => boolean) {
  for (let i = 0; i < 600; i++) {
    const job = await getJob(db, { tenantId, jobId });
    if (job && ["succeeded", "failed", "cancelled"].includes(job.status)) return job.status;
    if (exited()) throw new Error(`the worker exited while job ${jobId} was ${job?.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`job ${jobId} did not finish`);
}

Deno.test("a worker started during an outage waits for its dependencies", async (t) => {
  const pg = await startPostgres();
  const db = await openDatabase({ url: pg.url, maxConnections: 4 });
  const tenantId = await createTenant(db);
  const s3Dir = await Deno.makeTempDir({ prefix: "seed-s3-" });
  let s3 = await startLocalS3({ directory: s3Dir });
  const env = {
    DATABASE_URL: pg.url,
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: "start-outage",
    S3_ACCESS_KEY_ID: "S3RVER",
    S3_SECRET_ACCESS_KEY: "S3RVER",
  };
  try {
    await t.step("Postgres down at start: the worker waits, then runs a job", async () => {
      await pg.pause();
      const w = spawnWorker(env);
      let exited = false;
      w.status.then(() => exited = true);
      try {
        const line = JSON.parse(await w.waitForLine("the database is unreachable"));
        assert.equal(line.level, "warn");
        await pg.resume();
        await w.waitForLine("worker started");
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 2 }) });
        assert.equal(await finalStatus(db, tenantId, job.id, () => exited), "succeeded");
      } finally {
        w.child.kill("SIGTERM");
      }
      const status = await w.status;
      await w.reading;
      assert.equal(status.code, 0, w.lines.join("\n"));
      assert.ok(!w.lines.some((l) => l.includes("Uncaught")), w.lines.join("\n"));
    });

    await t.step("the store down at start: the worker waits, then runs a job", async () => {
      await s3.stop();
      const w = spawnWorker(env);
      let exited = false;
      w.status.then(() => exited = true);
      try {
        await w.waitForLine("the artifact store is unreachable");
        s3 = await startLocalS3({ directory: s3Dir, port: Number(new URL(s3.endpoint).port) });
        await w.waitForLine("worker started");
        const { job } = await submitJob(db, { tenantId, spec: testSpec({ steps: 2 }) });
        assert.equal(await finalStatus(db, tenantId, job.id, () => exited), "succeeded");
      } finally {
        w.child.kill("SIGTERM");
      }
      assert.equal((await w.status).code, 0, w.lines.join("\n"));
    });

    await t.step("a stop signal while the database is down exits 0 at once", async () => {
      await pg.pause();
      const w = spawnWorker(env);
      try {
        await w.waitForLine("the database is unreachable");
      } finally {
        w.child.kill("SIGTERM");
      }
      const status = await w.status;
      await pg.resume();
      await w.reading;
      assert.equal(status.code, 0, w.lines.join("\n"));
      assert.ok(w.lines.some((l) => l.includes("stopped before the database")), w.lines.join("\n"));
    });

    await t.step("a drained worker exits after a database restart", async () => {
      const w = spawnWorker(env);
      await w.waitForLine("worker started");
      await pg.pause();
      await pg.resume();
      w.child.kill("SIGTERM");
      const status = await w.status;
      await w.reading;
      assert.equal(status.code, 0, w.lines.join("\n"));
      assert.ok(w.lines.some((l) => l.includes("worker stopped")), w.lines.join("\n"));
    });

    await t.step("a bucket name under 3 characters is one line and exit 1", async () => {
      const w = spawnWorker({ ...env, S3_BUCKET: "ab" });
      const status = await w.status;
      await w.reading;
      assert.equal(status.code, 1);
      const text = w.lines.join("\n");
      assert.equal(w.lines.filter(Boolean).length, 1, text);
      const line = JSON.parse(w.lines[0]);
      assert.equal(line.msg, "the worker cannot start");
      assert.match(line.error, /S3_BUCKET must be 3–63 lowercase letters.*current value is "ab"/);
      assert.ok(!/\n\s+at /.test(text), text);
    });
  } finally {
    await db.close();
    await s3.stop();
    await pg.stop();
    await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
  }
});
