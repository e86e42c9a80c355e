/**
 * `DELETE /v1/jobs/{id}` through the real server (HTTP, Postgres, S3 server) and the CLI: final
 * jobs only (409 while queued, running or cancelling, or while an active job trains from it; 404
 * for another tenant's), every object under the job's prefix and every row gone, nothing of
 * another job touched; a delete cut off between its steps hides the job and is finished by a
 * repeated DELETE or by the sweeper.
 */
import assert from "node:assert/strict";
import {
  type ArtifactStore,
  cancelJob,
  fenceOf,
  type Job,
  jobPrefix,
  markJobDeleting,
  purgeDeletedJob,
  recordMetrics,
  saveCheckpoint,
  saveSkillLibrary,
  succeedJob,
  sweepOrphans,
} from "../../jobs/mod.ts";
import { saveTrajectoryDump } from "../../jobs/trajectories.ts";
import { cliMain } from "../../api/client/cli.ts";
import type { CliIo } from "../../api/client/cli_io.ts";
import { serveApi } from "../../api/main.ts";
import { claimAs, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();
for (const [k, v] of Object.entries({ ...fx.s3Env, DATABASE_URL: fx.url })) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const base = `http://127.0.0.1:${api.port}`;

async function call(method: string, path: string, options: { key?: string; json?: unknown } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${options.key ?? fx.keyA}` };
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: options.json === undefined ? undefined : JSON.stringify(options.json),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * seed) % 251);

/** Submits a job (priority 1000) as tenant A and claims it as a worker. */
async function claimed(spec: Record<string, unknown> = { env: { id: "sokoban" } }): Promise<Job> {
  const res = await call("POST", "/v1/jobs", { json: { ...spec, priority: 1000 } });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return await claimAs(fx.db, res.body.id);
}

/**
 * A succeeded job of tenant A with one of everything a job writes: events, metrics, two
 * checkpoints, a skill library, a trajectory dump with an image, a rollout-policy object and an
 * object no row owns (a lost run's upload). Returns the job and its object keys.
 */
async function finishedJob(): Promise<{ job: Job; keys: string[] }> {
  const job = await claimed();
  const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
  await recordMetrics(fx.db, writer.fence, 1, { loss: 1 });
  for (const step of [1, 2]) {
    await saveCheckpoint(fx.db, fx.store, writer, {
      step,
      files: [{ name: "model.safetensors", bytes: bytes(3000, step) }, {
        name: "config.json",
        bytes: new TextEncoder().encode("{}"),
      }],
    });
  }
  await saveSkillLibrary(fx.db, fx.store, writer, {
    step: 2,
    json: { version: 1, job_id: job.id, step: 2, skills: [] },
    skillCount: 0,
  });
  await saveTrajectoryDump(fx.db, fx.store, writer, {
    step: 1,
    kind: "rollout",
    json: { trajectories: [] },
    trajectoryCount: 0,
    images: [{ name: "rollout-0-0.png", bytes: bytes(64, 7), width: 2, height: 2 }],
  });
  const prefix = jobPrefix(fx.tenantA.id, job.id);
  await fx.store.put(`${prefix}rollout-policy/v1/attempt-0/model.safetensors`, bytes(100, 3));
  await fx.store.put(`${prefix}checkpoints/step-3/attempt-0/model.safetensors`, bytes(10, 5));
  await succeedJob(fx.db, writer.fence);
  const keys = await fx.store.list(prefix);
  return { job, keys };
}

/** Rows that reference the job, by table. */
async function rowsOf(jobId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (
    const table of [
      "jobs",
      "job_events",
      "job_metrics",
      "checkpoints",
      "skill_libraries",
      "trajectory_dumps",
    ]
  ) {
    const column = table === "jobs" ? "id" : "job_id";
    const [row] = await fx.db.query<{ n: number }>(
      `select count(*)::int as n from ${table} where ${column} = $1::uuid`,
      [jobId],
    );
    out[table] = Number(row.n);
  }
  return out;
}

const NO_ROWS = {
  jobs: 0,
  job_events: 0,
  job_metrics: 0,
  checkpoints: 0,
  skill_libraries: 0,
  trajectory_dumps: 0,
};

Deno.test("DELETE removes a final job's objects and rows and leaves another job's alone", async () => {
  const { job, keys } = await finishedJob();
  const kept = await finishedJob();
  // Every kind of object a job writes is there before the delete.
  for (const part of ["checkpoints/", "skills/", "trajectories/", "rollout-policy/", "/images/"]) {
    assert.ok(keys.some((k) => k.includes(part)), `${part} in ${keys}`);
  }
  const before = await rowsOf(job.id);
  for (const [table, n] of Object.entries(before)) assert.ok(n > 0, table);

  const res = await call("DELETE", `/v1/jobs/${job.id}`);
  assert.equal(res.status, 204);
  assert.equal(res.body, null);
  assert.deepEqual(await fx.store.list(jobPrefix(fx.tenantA.id, job.id)), []);
  assert.deepEqual(await rowsOf(job.id), NO_ROWS);
  assert.equal((await call("GET", `/v1/jobs/${job.id}`)).status, 404);
  assert.equal((await call("GET", `/v1/jobs/${job.id}/checkpoints`)).status, 404);
  assert.equal((await call("DELETE", `/v1/jobs/${job.id}`)).status, 404);
  // The other job keeps everything.
  assert.deepEqual(await fx.store.list(jobPrefix(fx.tenantA.id, kept.job.id)), kept.keys);
  const archive = await fetch(`${base}/v1/jobs/${kept.job.id}/checkpoints/2/archive`, {
    headers: { authorization: `Bearer ${fx.keyA}` },
  });
  assert.equal(archive.status, 200);
  await archive.body?.cancel();
});

Deno.test("DELETE is a 409 while a job is queued, running or cancelling, and a 404 for another tenant's job", async () => {
  const running = await claimed();
  const queued = await call("POST", "/v1/jobs", { json: { env: { id: "sokoban" } } });
  for (const [id, status] of [[queued.body.id, "queued"], [running.id, "running"]]) {
    const res = await call("DELETE", `/v1/jobs/${id}`);
    assert.equal(res.status, 409);
    assert.match(res.body.detail, new RegExp(`must be final .*: it is ${status}`));
    assert.ok(
      res.body.detail.includes(
        `it is ${status}; cancel it first with \`seed cancel ${id}\` or \`POST /v1/jobs/${id}/cancel\``,
      ),
      res.body.detail,
    );
  }
  await cancelJob(fx.db, { tenantId: fx.tenantA.id, jobId: running.id });
  const cancelling = await call("DELETE", `/v1/jobs/${running.id}`);
  assert.equal(cancelling.status, 409);
  assert.match(cancelling.body.detail, /it is cancelling; retry once it is cancelled/);
  assert.doesNotMatch(cancelling.body.detail, /cancel it first/);
  assert.equal((await call("GET", `/v1/jobs/${running.id}`)).body.status, "cancelling");

  const { job } = await finishedJob();
  const other = await call("DELETE", `/v1/jobs/${job.id}`, { key: fx.keyB });
  assert.equal(other.status, 404);
  assert.equal((await call("DELETE", `/v1/jobs/${crypto.randomUUID()}`)).status, 404);
  assert.equal((await call("DELETE", "/v1/jobs/not-a-uuid")).status, 404);
  assert.equal((await call("GET", `/v1/jobs/${job.id}`)).status, 200);
  assert.ok((await fx.store.list(jobPrefix(fx.tenantA.id, job.id))).length > 0);
  // A queued job is cancelled at once, and can then be deleted.
  await call("POST", `/v1/jobs/${queued.body.id}/cancel`);
  assert.equal((await call("DELETE", `/v1/jobs/${queued.body.id}`)).status, 204);
  await succeedJob(fx.db, fenceOf(running));
});

Deno.test("DELETE is a 409 while an active job trains from the job's checkpoint", async () => {
  const { job } = await finishedJob();
  const user = await call("POST", "/v1/jobs", {
    json: { env: { id: "sokoban" }, model: { base: `job:${job.id}@2` } },
  });
  assert.equal(user.status, 201, JSON.stringify(user.body));
  const res = await call("DELETE", `/v1/jobs/${job.id}`);
  assert.equal(res.status, 409);
  assert.match(res.body.detail, new RegExp(`job ${user.body.id} uses it as model.base`));
  assert.ok(res.body.detail.includes(`seed cancel ${user.body.id}`), res.body.detail);
  assert.equal((await call("GET", `/v1/jobs/${job.id}`)).status, 200);
  await call("POST", `/v1/jobs/${user.body.id}/cancel`);
  assert.equal((await call("DELETE", `/v1/jobs/${job.id}`)).status, 204);
});

/** The real store whose `delete` fails after `okDeletes` successful ones (an outage mid-delete). */
function failingAfter(store: ArtifactStore, okDeletes: number) {
  let left = okDeletes;
  return {
    list: (prefix: string) => store.list(prefix),
    delete: async (key: string) => {
      if (left-- <= 0) throw new Error("the store went away");
      await store.delete(key);
    },
  };
}

Deno.test("a delete cut off after some objects hides the job, and a repeated DELETE finishes it", async () => {
  const { job, keys } = await finishedJob();
  const marked = await markJobDeleting(fx.db, { tenantId: fx.tenantA.id, jobId: job.id });
  assert.ok(marked && !("reason" in marked));
  await assert.rejects(
    purgeDeletedJob(fx.db, failingAfter(fx.store, 2), marked),
    /the store went away/,
  );
  const left = await fx.store.list(jobPrefix(fx.tenantA.id, job.id));
  assert.equal(left.length, keys.length - 2);
  // Half-way, nothing reads it: not the job, not its artifacts, not the list.
  assert.equal((await call("GET", `/v1/jobs/${job.id}`)).status, 404);
  assert.equal((await call("GET", `/v1/jobs/${job.id}/checkpoints/2/archive`)).status, 404);
  const listed = await call("GET", "/v1/jobs?limit=100");
  assert.ok(!listed.body.jobs.some((j: { id: string }) => j.id === job.id));
  assert.equal((await call("POST", `/v1/jobs/${job.id}/cancel`)).status, 404);
  assert.equal((await rowsOf(job.id)).checkpoints, 2);
  // Another tenant still cannot touch it.
  assert.equal((await call("DELETE", `/v1/jobs/${job.id}`, { key: fx.keyB })).status, 404);

  const retry = await call("DELETE", `/v1/jobs/${job.id}`);
  assert.equal(retry.status, 204);
  assert.deepEqual(await fx.store.list(jobPrefix(fx.tenantA.id, job.id)), []);
  assert.deepEqual(await rowsOf(job.id), NO_ROWS);
});

Deno.test("a delete cut off before its rows is finished by the sweeper once it is 10 minutes old", async () => {
  const { job } = await finishedJob();
  const marked = await markJobDeleting(fx.db, { tenantId: fx.tenantA.id, jobId: job.id });
  assert.ok(marked && !("reason" in marked));
  const young = await sweepOrphans(fx.db, fx.store);
  assert.equal(young.deletesFinished, 0);
  assert.equal((await rowsOf(job.id)).jobs, 1);
  const old = await sweepOrphans(fx.db, fx.store, { now: () => Date.now() + 11 * 60_000 });
  assert.equal(old.deletesFinished, 1);
  assert.deepEqual(await fx.store.list(jobPrefix(fx.tenantA.id, job.id)), []);
  assert.deepEqual(await rowsOf(job.id), NO_ROWS);
});

Deno.test("the CLI deletes a final job and prints the API's reason when it cannot", async () => {
  const { job } = await finishedJob();
  let out = "";
  const env: Record<string, string> = { SEED_API_URL: base, SEED_API_KEY: fx.keyA };
  const io: CliIo = {
    out: (t) => out += t,
    err: () => {},
    tty: false,
    env: (n) => env[n],
    stdin: () => Promise.resolve(""),
  };
  assert.equal(await cliMain(["delete", job.id], io), 0);
  assert.equal(out, `${job.id}\tdeleted\n`);
  assert.deepEqual(await fx.store.list(jobPrefix(fx.tenantA.id, job.id)), []);
  const queued = await call("POST", "/v1/jobs", { json: { env: { id: "sokoban" } } });
  await assert.rejects(
    cliMain(["delete", queued.body.id], io),
    /DELETE \/v1\/jobs\/.* failed with HTTP 409: Cannot delete job .* it is queued/,
  );
  await call("POST", `/v1/jobs/${queued.body.id}/cancel`);
});

Deno.test({
  name: "stop the job delete test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
