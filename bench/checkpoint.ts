/**
 * `deno task bench:checkpoint` (flags: `USAGE` below, which `--help` prints): one job whose
 * step state is `--state-mb` MB (weights + AdamW moments, bench/_checkpoint_handler.ts) run by a
 * real worker process in a compute process, against a throwaway Postgres and an s3rver. Every
 * step commits its state as a checkpoint and the next reads it back. Prints one JSON line:
 * heartbeat lateness (worst lateness of a 50 ms timer on the worker's control loop, against the
 * heartbeat interval lease/3), checkpoint commit and resume-read seconds per step, peak RSS of the
 * worker and of the compute process, and leases lost (requeues and attempts spent).
 */
import {
  ensureTenant,
  getJob,
  listEvents,
  openDatabase,
  parseJobSpec,
  startLocalS3,
  submitJob,
} from "../jobs/mod.ts";
import { startPostgres } from "../jobs/embedded/postgres_cluster.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `A model-sized step state committed and read back through a real worker's compute
process (bench/README.md, "deno task bench:checkpoint").

Usage:
  deno task bench:checkpoint [--state-mb 1200] [--steps 3] [--lease-ms 3000]

Flags:
  --state-mb N  the job's step state in MB: weights + AdamW's two moments, three files of a third
                each (default 1200)
  --steps N     steps of the job; each commits its state as a checkpoint and the next reads it
                back (default 3)
  --lease-ms N  the job's lease in ms; the heartbeat runs every lease/3 (default 3000)`;

const args = benchArgs({
  name: "bench:checkpoint",
  usage: USAGE,
  options: {
    "state-mb": { type: "string", default: "1200" },
    steps: { type: "string", default: "3" },
    "lease-ms": { type: "string", default: "3000" },
  },
});
const stateBytes = Number(args["state-mb"]) * 1e6;
const steps = Number(args.steps);
const leaseMs = Number(args["lease-ms"]);

const pg = await startPostgres();
const s3Dir = await Deno.makeTempDir({ prefix: "seed-bench-ckpt-s3-" });
const s3 = await startLocalS3({ directory: s3Dir });
const db = await openDatabase({ url: pg.url, maxConnections: 2 });
try {
  const tenantId = (await ensureTenant(db, "bench")).id;
  const spec = parseJobSpec({ env: { id: "sokoban" }, steps });
  const { job } = await submitJob(db, { tenantId, spec });
  console.error("bench: job", job.id);
  const started = performance.now();
  const worker = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./_checkpoint_worker.ts", import.meta.url).pathname],
    env: {
      DATABASE_URL: pg.url,
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: "bench",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      LOG_LEVEL: "info",
      WORKER_LEASE_MS: String(leaseMs),
      REAPER_INTERVAL_MS: "500",
      STATE_BYTES: String(stateBytes),
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // The worker's log, read as it comes (a full pipe would stall the worker) and kept.
  const lines: string[] = [];
  const reading = (async () => {
    let rest = "";
    for await (const chunk of worker.stderr.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      lines.push(...parts);
      if (Deno.env.get("BENCH_VERBOSE")) { for (const p of parts) console.error(p); }
    }
  })();
  let exited = false;
  worker.status.then(() => exited = true);
  let final = job;
  for (;;) {
    if (exited) break; // the worker died: its log says why
    final = (await getJob(db, { tenantId, jobId: job.id }))!;
    if (["succeeded", "failed", "cancelled"].includes(final.status)) break;
    if (performance.now() - started > 30 * 60_000) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const wallS = (performance.now() - started) / 1000;
  if (!exited) worker.kill("SIGTERM");
  await worker.status;
  await reading;
  const logs = lines.filter(Boolean).map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return { msg: l };
    }
  });
  const lag = logs.filter((l) => l.msg === "bench.lag").at(-1) as
    | { maxLateMs: number; peakRssBytes: number }
    | undefined;
  const stepsLog = logs.filter((l) => l.msg === "bench.step") as unknown as {
    step: number;
    commitS: number;
    resumeS: number;
    peakRssBytes: number;
  }[];
  const statuses = (await listEvents(db, job.id)).filter((e) => e.type === "status")
    .map((e) => (e.data as { status: string }).status);
  const mb = (b: number) => Math.round(b / 1e6);
  console.log(JSON.stringify({
    stateMb: stateBytes / 1e6,
    steps,
    leaseMs,
    heartbeatIntervalMs: Math.round(leaseMs / 3),
    status: final.status,
    error: final.error ?? undefined,
    attemptsSpent: final.attempt,
    requeues: statuses.filter((s) => s === "queued").length - 1,
    leaseLostLogs: logs.filter((l) =>
      /lease lost|blocked the event loop/.test(String(l.msg))
    ).length,
    controlLoopMaxLateMs: lag?.maxLateMs,
    commitS: stepsLog.map((s) => +s.commitS.toFixed(2)),
    resumeS: stepsLog.map((s) => +s.resumeS.toFixed(2)).slice(1),
    peakRssMb: {
      worker: lag && mb(lag.peakRssBytes),
      compute: mb(Math.max(...stepsLog.map((s) => s.peakRssBytes))),
    },
    wallS: +wallS.toFixed(1),
  }));
  if (final.status !== "succeeded") {
    console.error(logs.filter((l) => !String(l.msg).startsWith("bench.")).slice(-10));
  }
} finally {
  await db.close();
  await s3.stop();
  await pg.stop();
  await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
}
