/**
 * A worker process killed (SIGKILL, by pid) between a step's uploads and its commit loses
 * nothing and leaves nothing half-written: every step is either whole (metrics, checkpoint, skill
 * library, `step` event) or absent, and the resumed job ends with every step exactly once.
 */
import assert from "node:assert/strict";
import {
  getJob,
  listEvents,
  listMetrics,
  reapExpiredLeases,
  stepRecord,
  submitJob,
} from "../../../jobs/mod.ts";
import { createTenant, openTestDatabase, testSpec } from "../../_harness/fixtures.ts";
import { startTestStore } from "../../_harness/s3.ts";

const STEPS = 6;
/** How long a worker may take to reach a step's upload before the test gives up (ms). */
const UPLOAD_DEADLINE_MS = 120_000;

/**
 * Resolves as soon as a path under `directory` matches `pattern`: on a file-system event, or on a
 * scan every 50 ms. The scan is needed because a recursive watch adds its watch on a new folder
 * only after the folder appears, so the events of files written into it at once can be missed
 * (s3rver stores key `…/skills/step-2/attempt-1.json` as files `attempt-1.json._S3rver_object`,
 * `….md5` and `attempt-1.json._S3rver_metadata.json` in the key's folder `…/skills/step-2`, which
 * its PUT creates fresh); waiting on events alone hung CI for 50 minutes. Rejects when `child`
 * exits first or after {@link UPLOAD_DEADLINE_MS}.
 */
async function waitForPath(
  directory: string,
  pattern: RegExp,
  child: Deno.ChildProcess,
): Promise<void> {
  const watcher = Deno.watchFs(directory, { recursive: true });
  const abort = new AbortController();
  const exists = async (dir: string): Promise<boolean> => {
    const entries: Deno.DirEntry[] = [];
    try {
      for await (const entry of Deno.readDir(dir)) entries.push(entry);
    } catch {
      return false; // s3rver may remove a folder while we read it
    }
    for (const entry of entries) {
      const path = `${dir}/${entry.name}`;
      if (pattern.test(path)) return true;
      if (entry.isDirectory && await exists(path)) return true;
    }
    return false;
  };
  const onEvent = (async () => {
    for await (const event of watcher) {
      if (event.paths.some((p) => pattern.test(p))) return;
    }
  })();
  const onScan = (async () => {
    while (!abort.signal.aborted) {
      if (await exists(directory)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const onExit = new Promise<never>((_, reject) => {
    child.status.then((s) => {
      if (!abort.signal.aborted) {
        reject(new Error(`the worker exited (code ${s.code}) before a path matched ${pattern}`));
      }
    });
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const onDeadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no path matched ${pattern} within ${UPLOAD_DEADLINE_MS} ms`)),
      UPLOAD_DEADLINE_MS,
    );
  });
  try {
    await Promise.race([onEvent, onScan, onExit, onDeadline]);
  } finally {
    clearTimeout(timer);
    abort.abort();
    watcher.close();
    await onScan;
  }
}

Deno.test("a worker killed between a step's uploads and its commit loses nothing", async () => {
  const { db, url, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantId = await createTenant(db);
  const spawnProcess = () =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./_compute_worker.ts", import.meta.url).pathname],
      env: {
        ...s3.env,
        DATABASE_URL: url,
        WORKER_LEASE_MS: "60000",
        REAPER_INTERVAL_MS: "0",
        BLOCK_MS: "50",
        ARTIFACTS: "1",
        LOG_LEVEL: "error",
      },
      stdout: "null",
      stderr: "piped",
    }).spawn();
  /** The last 4 KB a worker wrote to stderr, for the message of a test that fails. */
  let stderrTail = "";
  const spawnWorker = () => {
    const child = spawnProcess();
    child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({
        write: (chunk) => void (stderrTail = (stderrTail + chunk).slice(-4096)),
      }),
    ).catch(() => {});
    return child;
  };
  /** Every step is all there or not there at all; returns the committed steps. */
  const wholeSteps = async (jobId: string) => {
    const committed: number[] = [];
    for (let step = 1; step <= STEPS; step++) {
      const r = await stepRecord(db, jobId, step);
      const parts = [r.metrics, r.checkpoint, r.skills, r.events.includes("step")];
      assert.ok(parts.every((p) => p === parts[0]), `step ${step} is half-committed: ${parts}`);
      if (parts[0]) committed.push(step);
    }
    return committed;
  };
  try {
    const { job } = await submitJob(db, {
      tenantId,
      spec: testSpec({ steps: STEPS, max_attempts: 5 }),
    });
    for (const target of [2, 4]) {
      // Kill the worker the moment step `target`'s skill library upload reaches the store (its
      // folder appears when s3rver starts the PUT): its checkpoint objects are uploaded, its rows
      // are not yet committed.
      const child = spawnWorker();
      await waitForPath(s3.directory, new RegExp(`/skills/step-${target}(/|$)`), child)
        .catch(async (error) => {
          try {
            child.kill("SIGKILL");
          } catch { /* it had exited */ }
          await child.status;
          throw new Error(`${error.message}; the worker's stderr ends:\n${stderrTail}`);
        });
      child.kill("SIGKILL");
      await child.status;
      const committed = await wholeSteps(job.id);
      assert.ok(committed.length < STEPS, "the job was still running when killed");
      const [reaped] = await reapExpiredLeases(db, { now: new Date(Date.now() + 120_000) });
      assert.equal(reaped.id, job.id);
    }
    const child = spawnWorker();
    for (let i = 0; i < 600; i++) {
      if ((await getJob(db, { tenantId, jobId: job.id }))?.status === "succeeded") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill("SIGTERM");
    await child.status;
    const after = (await getJob(db, { tenantId, jobId: job.id }))!;
    assert.equal(after.status, "succeeded");
    assert.equal(after.attempt, 2);
    assert.deepEqual(await wholeSteps(job.id), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual((await listMetrics(db, job.id)).map((m) => m.step), [1, 2, 3, 4, 5, 6]);
    const stepEvents = (await listEvents(db, job.id, { limit: 1000 }))
      .filter((e) => e.type === "step").map((e) => (e.data as { step: number }).step);
    assert.deepEqual(stepEvents, [1, 2, 3, 4, 5, 6], "each step announced exactly once");
  } finally {
    await s3.close();
    await close();
  }
});
