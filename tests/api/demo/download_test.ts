/**
 * The demo's download (`api/demo/summary.ts` `downloadArtifacts`) over real HTTP against the API
 * with a real Postgres and S3 server: a second run never replaces the first run's output folder,
 * and runs started together each write the folder they took at the start.
 */
import assert from "node:assert/strict";
import { fenceOf, saveCheckpoint, succeedJob } from "../../../jobs/mod.ts";
import { SeedClient } from "../../../api/client/mod.ts";
import { DemoDownloadError, downloadArtifacts } from "../../../api/demo/summary.ts";
import { claimOutputFolder } from "../../../api/demo/output_folder.ts";
import type { JobWire } from "../../../api/demo/progress.ts";
import { serveApi } from "../../../api/main.ts";
import { runningJob, startApiFixture } from "../_fixture.ts";

const fx = await startApiFixture();
const serverEnv = { ...fx.s3Env, DATABASE_URL: fx.url, SEED_SECRETS_KEY: "5a".repeat(32) };
for (const [k, v] of Object.entries(serverEnv)) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const client = new SeedClient({ baseUrl: `http://127.0.0.1:${api.port}`, apiKey: fx.keyA });

/** A succeeded job whose one checkpoint holds `weights`, as the API returns it. */
async function finishedJob(weights: Uint8Array): Promise<JobWire> {
  const job = await runningJob(fx, fx.keyA);
  await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
    step: 1,
    files: [{ name: "model.safetensors", bytes: weights }],
  });
  await succeedJob(fx.db, fenceOf(job));
  return await client.json<JobWire>(`/v1/jobs/${job.id}`);
}

Deno.test("a second demo download keeps the first run's folder and writes the next free -N one", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-download-" });
  try {
    const outDir = `${tmp}/demo-output`;
    const first = await finishedJob(new Uint8Array([1, 2, 3]));
    const a = await downloadArtifacts(client, first, { outDir, spec: { run: 1 } });
    assert.equal(a.outDir, outDir);
    assert.equal(a.passedOver, null);

    const second = await finishedJob(new Uint8Array([4, 5, 6, 7]));
    const b = await downloadArtifacts(client, second, { outDir, spec: { run: 2 } });
    assert.equal(b.outDir, `${outDir}-2`);
    assert.equal(b.passedOver, outDir);
    assert.equal(b.checkpointDir, `${outDir}-2/checkpoint`);
    // The first run's files are as it left them; the second run's are beside them.
    assert.equal(JSON.parse(await Deno.readTextFile(`${outDir}/job.json`)).id, first.id);
    assert.deepEqual(JSON.parse(await Deno.readTextFile(`${outDir}/spec.json`)), { run: 1 });
    assert.deepEqual(
      await Deno.readFile(`${outDir}/checkpoint/step-1/model.safetensors`),
      new Uint8Array([1, 2, 3]),
    );
    assert.equal(JSON.parse(await Deno.readTextFile(`${outDir}-2/job.json`)).id, second.id);
    assert.deepEqual(
      await Deno.readFile(`${outDir}-2/checkpoint/step-1/model.safetensors`),
      new Uint8Array([4, 5, 6, 7]),
    );
    // A third run goes to -3; no partial folder is left behind.
    const c = await downloadArtifacts(client, second, { outDir, spec: { run: 3 } });
    assert.equal(c.outDir, `${outDir}-3`);
    const names = [];
    for await (const e of Deno.readDir(tmp)) names.push(e.name);
    assert.deepEqual(names.sort(), ["demo-output", "demo-output-2", "demo-output-3"]);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("the demo writes into an empty folder it is given, and past a file of that name", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-download-" });
  try {
    await Deno.mkdir(`${tmp}/empty`);
    const job = await finishedJob(new Uint8Array([9]));
    const a = await downloadArtifacts(client, job, { outDir: `${tmp}/empty`, spec: {} });
    assert.equal(a.outDir, `${tmp}/empty`);
    assert.equal(a.passedOver, null);
    assert.equal(JSON.parse(await Deno.readTextFile(`${tmp}/empty/job.json`)).id, job.id);
    await Deno.writeTextFile(`${tmp}/file`, "not a folder");
    const b = await downloadArtifacts(client, job, { outDir: `${tmp}/file`, spec: {} });
    assert.equal(b.outDir, `${tmp}/file-2`);
    assert.equal(b.passedOver, `${tmp}/file`);
    assert.equal(await Deno.readTextFile(`${tmp}/file`), "not a folder");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("demos started together each write the folder they took, whichever finishes first", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-download-" });
  try {
    const outDir = `${tmp}/demo-output`;
    // Both take a folder before their job runs, as the demo does to name it in its first lines.
    const [first, second] = await Promise.all([
      claimOutputFolder(outDir),
      claimOutputFolder(outDir),
    ]);
    assert.notEqual(first.path, second.path);
    const jobs = [await finishedJob(new Uint8Array([1])), await finishedJob(new Uint8Array([2]))];
    // The run that took `demo-output-2` finishes first; neither moves to another folder.
    const inBase = first.path === outDir ? first : second;
    const inNext = inBase === first ? second : first;
    const b = await downloadArtifacts(client, jobs[1], { outDir: inNext, spec: { run: 2 } });
    const a = await downloadArtifacts(client, jobs[0], { outDir: inBase, spec: { run: 1 } });
    assert.equal(a.outDir, outDir);
    assert.equal(a.passedOver, null);
    assert.equal(b.outDir, `${outDir}-2`);
    assert.equal(b.passedOver, outDir);
    assert.equal(JSON.parse(await Deno.readTextFile(`${outDir}/job.json`)).id, jobs[0].id);
    assert.equal(JSON.parse(await Deno.readTextFile(`${outDir}-2/job.json`)).id, jobs[1].id);
    assert.deepEqual(
      await Deno.readFile(`${outDir}-2/checkpoint/step-1/model.safetensors`),
      new Uint8Array([2]),
    );
    const names = [];
    for await (const e of Deno.readDir(tmp)) names.push(e.name);
    assert.deepEqual(names.sort(), ["demo-output", "demo-output-2"]);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("a download that fails gives back the folder it took, and keeps a folder the user made", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-download-" });
  try {
    const job = await runningJob(fx, fx.keyA);
    await succeedJob(fx.db, fenceOf(job));
    const wire = await client.json<JobWire>(`/v1/jobs/${job.id}`);
    const taken = await claimOutputFolder(`${tmp}/out`);
    // The job succeeded without saving a checkpoint: in the words of seed download.
    await assert.rejects(
      downloadArtifacts(client, wire, { outDir: taken, spec: {} }),
      new DemoDownloadError(`Cannot download job ${job.id} as it has no checkpoints`),
    );
    await Deno.mkdir(`${tmp}/mine`);
    await assert.rejects(
      downloadArtifacts(client, wire, { outDir: `${tmp}/mine`, spec: {} }),
      DemoDownloadError,
    );
    const names = [];
    for await (const e of Deno.readDir(tmp)) names.push(e.name);
    assert.deepEqual(names, ["mine"]);
    for await (const _ of Deno.readDir(`${tmp}/mine`)) {
      assert.fail("the user's folder must stay empty");
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test({
  name: "stop the demo download test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
