/**
 * `deno task bench:chaos` (flags: `USAGE` below, which `--help` prints) — the service under an
 * adversarial operator.
 *
 * Starts a throwaway Postgres (jobs/embedded/postgres_cluster.ts), an S3 server over a temporary
 * folder, the API (`api/main.ts`) and `--workers` worker processes (`workers/main.ts`, the real
 * trainer in compute processes) with a lease of `--lease-ms`, submits `--jobs` tiny SEED jobs
 * through the API, and meanwhile: SIGKILLs or SIGTERMs (7:3) a random worker every
 * `--kill-every-s` (a replacement starts at once), stops Postgres `--db-outages` times for a
 * random `--db-outage-s` each, stops the S3 server once for `--s3-outage-s`, cancels `--cancels`
 * running jobs, and polls the API throughout.
 *
 * `--model tiny` (default) trains `builtin:tiny`. `--model large` uploads a Qwen3-architecture
 * model of width `--hidden` with random weights through `POST /v1/models` (bench/_chaos_model.ts;
 * 640: ≈ 103 M parameters, so a full fine-tuning step's state — F32 weights and AdamW's two moments
 * — is ≈ 1.2 GB) and trains it in full, so every checkpoint moves that state between compute
 * process, control loop and store under the same chaos. Workers run bench/_chaos_worker.ts (the
 * real worker plus a probe of its event loop's lateness and of its and its compute processes' peak
 * RSS).
 *
 * When every job is final (or `--max-minutes`), it
 * prints and checks:
 *
 * - jobs succeeded / failed / cancelled;
 * - every step's metrics exactly once (0…steps for each succeeded job);
 * - every checkpoint's archive downloads through the API with a valid `SHA256SUMS`;
 * - every checkpoint step has its skill library;
 * - no job was held by two live workers at once: no lease reaped while its worker was alive
 *   (from the status events and the workers' exit times), no "lease lost" in any worker's log;
 * - no worker exited without a signal from the bench, and no worker's log has an uncaught error
 *   (a worker that dies anyway is replaced at once, so the remaining jobs still run);
 * - API answers ≥ 500 other than 503 (must be 0), and 503s (each with `Retry-After`);
 * - seconds from cancel to `cancelled` (p50 / max);
 * - the longest phase of any step (from the metrics) beside the lease;
 * - heartbeat lateness: the worst lateness of a 50 ms timer on any worker's control loop, beside
 *   the heartbeat interval (lease / 3), and the peak RSS of the workers and compute processes.
 *
 * It creates `--log-dir` when missing, and stops everything it started (workers, API, S3 server,
 * its Postgres cluster by pid) on every exit: normal, a signal, or a crash of the bench itself.
 *
 * Exits 1 when a check fails. Not a test: it runs for minutes (the defaults aim at < 15 min on
 * 2 cores); `USAGE` ends with a short smoke run.
 */
import { createKey, ensureTenant } from "../jobs/api_keys.ts";
import { extractVerified } from "../api/client/extract.ts";
import {
  type Database,
  getSkillLibrary,
  listCheckpoints,
  listEvents,
  listMetrics,
  type LocalS3,
  openDatabase,
  startLocalS3,
} from "../jobs/mod.ts";
import { startPostgres } from "../jobs/embedded/postgres_cluster.ts";
import { parameterCount } from "../workers/model/config.ts";
import { largeQwen3Config, largeQwen3Tar } from "./_chaos_model.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `The service under an adversarial operator: real workers, an API and a Postgres over
tiny SEED jobs while workers are killed, Postgres and the S3 server stopped and jobs
cancelled; prints and checks what survived (exits 1 when a check fails).

Usage:
  deno task bench:chaos [--workers 3] [--jobs 20] [--steps 2] [--lease-ms 1000]
    [--db-outages 2] [--db-outage-s 10-30] [--s3-outage-s 10-20] [--outage-gap-s 15-30]
    [--kill-every-s 20] [--cancels 3] [--cancel-after-s 10-30] [--max-minutes 14] [--seed 1]
    [--log-dir DIR] [--model tiny|large] [--hidden 640]

Flags (ranges A-B are seconds, drawn uniformly):
  --workers N          worker processes; a killed one is replaced at once (default 3)
  --jobs N             tiny SEED jobs submitted through the API (default 20)
  --steps N            RL steps per job, each checkpointed (default 2)
  --lease-ms N         the workers' lease in ms (default 1000)
  --db-outages N       times Postgres is stopped (default 2)
  --db-outage-s A-B    how long each Postgres outage lasts (default 10-30)
  --s3-outage-s A-B    how long the one S3 server outage lasts (default 10-20)
  --outage-gap-s A-B   the wait before each outage (default 15-30)
  --kill-every-s S     a random worker is SIGKILLed or SIGTERMed (7:3) about this often (default 20)
  --cancels N          running jobs cancelled, at most (default 3)
  --cancel-after-s A-B the wait before each cancel (default 10-30)
  --max-minutes N      stops waiting for the jobs after this long (default 14)
  --seed N             seed of the schedule, so a run's chaos can be repeated (default 1)
  --log-dir DIR        keeps each worker's log in DIR/<worker id>.log (created when missing)
  --model tiny|large   tiny trains builtin:tiny; large uploads a Qwen3-architecture model of width
                       --hidden with random weights and trains it in full (default tiny)
  --hidden N           the large model's width (default 640: ~1.2 GB of full fine-tuning step
                       state)

Short smoke run: --jobs 3 --steps 1 --db-outages 1 --db-outage-s 3-4 --s3-outage-s 3-4
  --outage-gap-s 5-8 --kill-every-s 15 --cancels 1 --cancel-after-s 5-10 --max-minutes 3`;

const args = benchArgs({
  name: "bench:chaos",
  usage: USAGE,
  options: {
    workers: { type: "string", default: "3" },
    jobs: { type: "string", default: "20" },
    steps: { type: "string", default: "2" },
    "lease-ms": { type: "string", default: "1000" },
    "db-outages": { type: "string", default: "2" },
    "db-outage-s": { type: "string", default: "10-30" },
    "s3-outage-s": { type: "string", default: "10-20" },
    "kill-every-s": { type: "string", default: "20" },
    "outage-gap-s": { type: "string", default: "15-30" },
    "cancel-after-s": { type: "string", default: "10-30" },
    cancels: { type: "string", default: "3" },
    "max-minutes": { type: "string", default: "14" },
    "log-dir": { type: "string" },
    seed: { type: "string", default: "1" },
    model: { type: "string", default: "tiny" },
    hidden: { type: "string", default: "640" },
  },
});
const N_WORKERS = Number(args.workers);
const N_JOBS = Number(args.jobs);
const STEPS = Number(args.steps);
const LEASE_MS = Number(args["lease-ms"]);
if (args.model !== "tiny" && args.model !== "large") {
  console.log(
    `Cannot run the bench as --model must be tiny or large: current value is ${args.model}`,
  );
  Deno.exit(2);
}
const range = (s: string) => s.split("-").map(Number) as [number, number];

/** mulberry32: a small seeded generator, so a run's schedule can be repeated. */
let rngState = Number(args.seed) >>> 0;
function random(): number {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const between = ([lo, hi]: [number, number]) => lo + random() * (hi - lo);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (msg: string) => console.log(`[${((Date.now() - T0) / 1000).toFixed(1)} s] ${msg}`);
const T0 = Date.now();

/**
 * A tiny SEED job (builtin:tiny on sokoban, or the large model: see below), checkpointed every
 * step.
 */
const SPEC: Record<string, unknown> = {
  env: { id: "sokoban", max_turns: 3, history: 0 },
  rollout: { tasks_per_step: 2, group_size: 2, max_new_tokens: 6 },
  seed: {
    analyzer_max_new_tokens: 48,
    analyzer_max_steps: 2,
    analyzer_max_field_chars: 64,
  },
  warmup: {
    policy: { episodes: 2, epochs: 1, batch_size: 8 },
    analyzer: { episodes: 2, epochs: 1, batch_size: 8 },
  },
  optim: { mini_batch_size: 8, lr: 1e-3 },
  steps: STEPS,
  eval_every: 1,
  checkpoint_every: 1,
  eval: { episodes: 2 },
  max_attempts: 20,
};

// --- the service --------------------------------------------------------------------------
const logDir = args["log-dir"];
if (logDir) await Deno.mkdir(logDir, { recursive: true });
const pg = await startPostgres();
const s3Dir = await Deno.makeTempDir({ prefix: "seed-chaos-s3-" });
let s3: LocalS3 | undefined;
/** What stopAll must stop besides the cluster, workers and S3 server, once it is started. */
const started: { api?: Deno.ChildProcess; db?: Database } = {};
let done = false;

/**
 * Stops everything this bench started — workers, API, S3 server, the Postgres cluster (by its
 * pid) — whether it ends normally, by a signal, or by a crash. Idempotent.
 */
let stopping: Promise<void> | undefined;
const workers = new Map<string, WorkerProcess>();
function stopAll(): Promise<void> {
  done = true;
  stopping ??= (async () => {
    const kill = (c: Deno.ChildProcess | undefined) => {
      try {
        c?.kill("SIGKILL");
      } catch { /* already exited */ }
    };
    for (const w of workers.values()) if (w.exitedAt === undefined) kill(w.child);
    kill(started.api);
    await Promise.allSettled([...workers.values()].map((w) => w.child.status));
    await started.api?.status.catch(() => {});
    await started.db?.close().catch(() => {});
    await s3?.stop().catch(() => {});
    await pg.stop();
    await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
  })();
  return stopping;
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, () => {
    console.log(`${signal}: stopping what the bench started`);
    stopAll().finally(() => Deno.exit(130));
  });
}
const crashed = (e: unknown) => {
  console.log(`the bench crashed: ${e instanceof Error ? e.stack : e}`);
  stopAll().finally(() => Deno.exit(2));
};
globalThis.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  crashed(event.reason);
});
globalThis.addEventListener("error", (event) => {
  event.preventDefault();
  crashed(event.error);
});

const db: Database = started.db = await openDatabase({ url: pg.url, maxConnections: 4 });
s3 = await startLocalS3({ directory: s3Dir });
const s3Port = s3.port;
const env = {
  DATABASE_URL: pg.url,
  S3_ENDPOINT: s3.endpoint,
  S3_BUCKET: "chaos",
  S3_ACCESS_KEY_ID: "S3RVER",
  S3_SECRET_ACCESS_KEY: "S3RVER",
  LOG_LEVEL: "warn",
};
await ensureTenant(db, "chaos");
const { key } = await createKey(db, "chaos");
const apiChild = started.api = new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", "api/main.ts"],
  env: { ...env, PORT: "0" },
  stdout: "null",
  stderr: "piped",
}).spawn();
const apiPort = await new Promise<number>((resolve) => {
  (async () => {
    let text = "";
    for await (const chunk of apiChild.stderr.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      const m = text.match(/"api listening".*"port":(\d+)/);
      if (m) resolve(Number(m[1]));
    }
  })();
});
const API = `http://127.0.0.1:${apiPort}`;
const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };

/** Worker processes by id: when each started and exited, and its "lease lost" log lines. */
interface WorkerProcess {
  id: string;
  child: Deno.ChildProcess;
  startedAt: number;
  exitedAt?: number;
  /** The signal the bench sent it, and when. */
  signalled?: { signal: string; at: number };
  leaseLost: number;
  /** Lines with "Uncaught" in its log (an unhandled error). */
  uncaught: number;
  /** Its exit code when it exited without a signal from this bench. */
  diedOnItsOwn?: number;
  /** From its `bench.lag` lines: worst event-loop lateness (ms), peak RSS (bytes). */
  maxLateMs: number;
  peakRssBytes: number;
  computePeakRssBytes: number;
}
/** A `bench.lag` line of bench/_chaos_worker.ts (one JSON line, fields in this order). */
const PROBE_LINE =
  /"msg":"bench\.lag","maxLateMs":(\d+),"peakRssBytes":(\d+),"computePeakRssBytes":(\d+)/g;
let workerCount = 0;
function spawnWorker(): WorkerProcess {
  const id = `chaos-w${++workerCount}`;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "bench/_chaos_worker.ts"],
    env: {
      ...env,
      WORKER_ID: id,
      WORKER_LEASE_MS: String(LEASE_MS),
      REAPER_INTERVAL_MS: "500",
      WORKER_POLL_MS: "500",
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const w: WorkerProcess = {
    id,
    child,
    startedAt: Date.now(),
    leaseLost: 0,
    uncaught: 0,
    maxLateMs: 0,
    peakRssBytes: 0,
    computePeakRssBytes: 0,
  };
  (async () => {
    const file = logDir
      ? await Deno.open(`${logDir}/${id}.log`, { create: true, write: true })
      : undefined;
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      w.leaseLost += chunk.split("lease lost").length - 1;
      w.uncaught += chunk.split("Uncaught").length - 1;
      for (const m of chunk.matchAll(PROBE_LINE)) {
        w.maxLateMs = Math.max(w.maxLateMs, Number(m[1]));
        w.peakRssBytes = Math.max(w.peakRssBytes, Number(m[2]));
        w.computePeakRssBytes = Math.max(w.computePeakRssBytes, Number(m[3]));
      }
      await file?.write(new TextEncoder().encode(chunk));
    }
    file?.close();
  })();
  child.status.then((status) => {
    w.exitedAt = Date.now();
    // A worker that ends by itself (not by this bench's signal) is a defect the checks report;
    // a replacement keeps the fleet at its size so that the remaining jobs still run.
    if (w.signalled || done) return;
    w.diedOnItsOwn = status.code;
    log(`${id} exited by itself (code ${status.code}); starting a replacement`);
    spawnWorker();
  });
  workers.set(id, w);
  return w;
}
const live = () => [...workers.values()].filter((w) => w.exitedAt === undefined);

// --- the API poller -------------------------------------------------------------------------
const answers = { total: 0, ok: 0, unavailable: 0, noRetryAfter: 0, other5xx: 0, failed: 0 };
async function api(path: string, init: RequestInit = {}): Promise<Response | undefined> {
  try {
    const res = await fetch(`${API}${path}`, { ...init, headers });
    answers.total++;
    if (res.status < 500) answers.ok++;
    else if (res.status === 503) {
      answers.unavailable++;
      if (!res.headers.get("retry-after")) answers.noRetryAfter++;
    } else {
      answers.other5xx++;
      log(
        `API ${init.method ?? "GET"} ${path} answered ${res.status}: ${await res.clone().text()}`,
      );
    }
    return res;
  } catch (e) {
    answers.failed++;
    log(`API ${path} unreachable: ${e}`);
    return undefined;
  }
}

// --- the large model ------------------------------------------------------------------------
if (args.model === "large") {
  const hidden = Number(args.hidden);
  const tar = await largeQwen3Tar(hidden);
  const params = parameterCount(largeQwen3Config(hidden));
  const res = await fetch(`${API}/v1/models?name=chaos-large`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/x-tar" },
    body: new Uint8Array(tar),
  });
  if (res.status !== 201) {
    throw new Error(`model upload answered ${res.status}: ${await res.text()}`);
  }
  SPEC.model = { base: (await res.json()).base };
  log(
    `uploaded a Qwen3 of width ${hidden}: ${(params / 1e6).toFixed(1)} M parameters, step state ${
      (params * 12 / 1e9).toFixed(2)
    } GB (F32 weights + AdamW moments)`,
  );
}

// --- run -------------------------------------------------------------------------------------
for (let i = 0; i < N_WORKERS; i++) spawnWorker();
const jobIds: string[] = [];
while (jobIds.length < N_JOBS) {
  const res = await api("/v1/jobs", { method: "POST", body: JSON.stringify(SPEC) });
  if (res?.status === 201) jobIds.push((await res.json()).id);
  else await sleep(500);
}
log(`${N_JOBS} jobs submitted; ${N_WORKERS} workers; lease ${LEASE_MS} ms`);
const statuses = new Map<string, string>();
const deadline = T0 + Number(args["max-minutes"]) * 60_000;

const poller = (async () => {
  while (!done) {
    await api(`/v1/jobs?limit=5`).then((r) => r?.body?.cancel());
    const id = jobIds[Math.floor(random() * jobIds.length)];
    const res = await api(`/v1/jobs/${id}`);
    if (res?.status === 200) statuses.set(id, (await res.json()).status);
    else await res?.body?.cancel();
    await sleep(200);
  }
})();

const killer = (async () => {
  const every = Number(args["kill-every-s"]) * 1000;
  while (!done) {
    await sleep(every * (0.5 + random()));
    const candidates = live();
    if (done || candidates.length === 0) break;
    const w = candidates[Math.floor(random() * candidates.length)];
    const signal = random() < 0.7 ? "SIGKILL" : "SIGTERM";
    log(`${signal} ${w.id}`);
    w.signalled = { signal, at: Date.now() };
    w.child.kill(signal);
    spawnWorker();
  }
})();

const outages = { db: [] as number[], s3: [] as number[] };
const outager = (async () => {
  // Postgres, then S3, then Postgres again (for --db-outages 2), `--outage-gap-s` apart.
  const plan: ("db" | "s3")[] = Array(Number(args["db-outages"])).fill("db");
  plan.splice(Math.min(1, plan.length), 0, "s3");
  for (const what of plan) {
    await sleep(between(range(args["outage-gap-s"])) * 1000);
    if (done) break;
    const s = between(range(args[what === "db" ? "db-outage-s" : "s3-outage-s"]));
    log(`${what === "db" ? "Postgres" : "S3 server"} stopped for ${s.toFixed(1)} s`);
    if (what === "db") await pg.pause();
    else await s3.stop();
    await sleep(s * 1000);
    if (what === "db") await pg.resume();
    else s3 = await startLocalS3({ directory: s3Dir, port: s3Port });
    outages[what].push(s);
    log(`${what === "db" ? "Postgres" : "S3 server"} back`);
  }
})();

const cancelSeconds: number[] = [];
const canceller = (async () => {
  for (let c = 0; c < Number(args.cancels) && !done; c++) {
    await sleep(between(range(args["cancel-after-s"])) * 1000);
    const running = jobIds.filter((id) => statuses.get(id) === "running");
    if (running.length === 0) continue;
    const id = running[Math.floor(random() * running.length)];
    let requestedAt = 0;
    while (!done) {
      const res = await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
      if (res?.status === 202) {
        // Only a running job's cancel is timed (a queued one is cancelled at once).
        if ((await res.json()).status === "cancelling") requestedAt = Date.now();
        break;
      }
      if (res?.status === 409) { // it ended before the cancel: nothing to time
        await res.body?.cancel();
        break;
      }
      await res?.body?.cancel();
      await sleep(200);
    }
    if (!requestedAt) continue;
    log(`cancel requested for ${id}`);
    while (!done) {
      const res = await api(`/v1/jobs/${id}`);
      const status = res?.status === 200 ? (await res.json()).status : await res?.body?.cancel();
      if (status === "cancelled") {
        cancelSeconds.push((Date.now() - requestedAt) / 1000);
        break;
      }
      if (status === "succeeded" || status === "failed") break; // finished before the cancel
      await sleep(100);
    }
  }
})();

// Wait for every job to be final (read from the database, which may be down for a while).
const FINAL = new Set(["succeeded", "failed", "cancelled"]);
while (Date.now() < deadline) {
  await sleep(2_000);
  try {
    const rows = await db.query<{ status: string }>(
      "select status from jobs where id = any($1::uuid[])",
      [jobIds],
    );
    if (rows.length === N_JOBS && rows.every((r) => FINAL.has(r.status))) break;
  } catch { /* the database is down: wait */ }
}
done = true;
log("stopping");
await Promise.all([killer, outager, canceller, poller]);
for (const w of live()) w.child.kill("SIGTERM");
await Promise.all([...workers.values()].map((w) => w.child.status));

// --- checks ---------------------------------------------------------------------------------
const failures: string[] = [];
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};
const byStatus = new Map<string, number>();
let metricsExact = 0;
let checkpoints = 0;
let archivesValid = 0;
let skillsPresent = 0;
let reapedAlive = 0;
let longestPhaseS = 0;
const scratch = await Deno.makeTempDir({ prefix: "seed-chaos-archive-" });
for (const id of jobIds) {
  const [{ status }] = await db.query<{ status: string }>(
    "select status::text from jobs where id = $1",
    [id],
  );
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  const metrics = await listMetrics(db, id);
  const steps = metrics.map((m) => m.step);
  if (status === "succeeded") {
    const expected = [...Array(STEPS + 1).keys()];
    if (JSON.stringify(steps) === JSON.stringify(expected)) metricsExact++;
    else failures.push(`job ${id}: metrics steps ${steps} (expected ${expected})`);
  }
  for (const m of metrics) {
    for (const [k, v] of Object.entries(m.values)) {
      if (k.startsWith("seconds_") && v > longestPhaseS) longestPhaseS = v;
    }
  }
  for (const ck of await listCheckpoints(db, id)) {
    checkpoints++;
    const res = await api(`/v1/jobs/${id}/checkpoints/${ck.step}/archive`);
    try {
      if (res?.status !== 200 || !res.body) throw new Error(`status ${res?.status}`);
      await extractVerified(res.body, `${scratch}/${id}-${ck.step}`);
      archivesValid++;
    } catch (e) {
      failures.push(`job ${id} checkpoint ${ck.step}: ${e}`);
    }
    if (await getSkillLibrary(db, id, ck.step)) skillsPresent++;
    else failures.push(`job ${id} checkpoint ${ck.step} has no skill library`);
  }
  // Holders from the status events: a lease reaped (attempt + 1, or failed for lost heartbeats)
  // while the worker holding it was still alive means two workers could run the job at once.
  const events = (await listEvents(db, id, { limit: 10_000 })).filter((e) => e.type === "status");
  for (let i = 0; i + 1 < events.length; i++) {
    const holder = (events[i].data as { worker_id?: string }).worker_id;
    const next = events[i + 1];
    const { status: nextStatus, error } = next.data as { status: string; error?: string };
    const reaped = next.attempt > events[i].attempt ||
      (nextStatus === "failed" && /stopped heartbeating/.test(error ?? ""));
    if (!holder || !reaped) continue;
    const w = workers.get(holder);
    const diedAt = w?.exitedAt ?? Infinity;
    if (diedAt > next.createdAt.getTime() + 1_000) {
      reapedAlive++;
      const iso = (t?: number) => (t === undefined ? "never" : new Date(t).toISOString());
      failures.push(
        `job ${id}: lease of live worker ${holder} reaped at ${next.createdAt.toISOString()} (${
          w?.signalled?.signal ?? "no signal"
        } at ${iso(w?.signalled?.at)}, exited ${iso(w?.exitedAt)})`,
      );
    }
  }
}
await Deno.remove(scratch, { recursive: true });
const leaseLost = [...workers.values()].reduce((s, w) => s + w.leaseLost, 0);
const pct = (xs: number[], p: number) =>
  xs.length
    ? [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(p * xs.length) - 1)] // nearest rank
    : NaN;

console.log("\n--- chaos bench ---");
console.log(
  `workers ${N_WORKERS} (${workerCount} started), jobs ${N_JOBS} × ${STEPS} steps, lease ${LEASE_MS} ms, ${
    ((Date.now() - T0) / 60_000).toFixed(1)
  } min`,
);
console.log(
  `outages: Postgres ${outages.db.map((s) => s.toFixed(1) + " s").join(", ") || "none"}; S3 ${
    outages.s3.map((s) => s.toFixed(1) + " s").join(", ") || "none"
  }`,
);
console.log(`jobs: ${[...byStatus].map(([s, n]) => `${s} ${n}`).join(", ")}`);
console.log(
  `API: ${answers.total} answers, 503 ${answers.unavailable} (without Retry-After ${answers.noRetryAfter}), other 5xx ${answers.other5xx}, unreachable ${answers.failed}`,
);
console.log(
  `cancel → cancelled: ${cancelSeconds.length} cancels, p50 ${
    pct(cancelSeconds, 0.5).toFixed(2)
  } s, max ${(cancelSeconds.length ? Math.max(...cancelSeconds) : NaN).toFixed(2)} s`,
);
console.log(
  `longest phase ${longestPhaseS.toFixed(2)} s vs lease ${(LEASE_MS / 1000).toFixed(1)} s`,
);
const all = [...workers.values()];
const maxOf = (f: (w: WorkerProcess) => number) => Math.max(0, ...all.map(f));
console.log(
  `heartbeat lateness: worst ${maxOf((w) => w.maxLateMs)} ms vs heartbeat interval ${
    Math.round(LEASE_MS / 3)
  } ms; peak RSS worker ${(maxOf((w) => w.peakRssBytes) / 1e9).toFixed(2)} GB, compute process ${
    (maxOf((w) => w.computePeakRssBytes) / 1e9).toFixed(2)
  } GB`,
);
check(
  (byStatus.get("succeeded") ?? 0) + (byStatus.get("cancelled") ?? 0) === N_JOBS,
  "every job succeeded or was cancelled",
);
check(metricsExact === (byStatus.get("succeeded") ?? 0), "each step's metrics exactly once");
check(archivesValid === checkpoints, `every checkpoint's SHA256SUMS valid (${checkpoints})`);
check(skillsPresent === checkpoints, "every checkpoint step has its skill library");
check(reapedAlive === 0 && leaseLost === 0, "no job held by two live workers at once");
const diedOnTheirOwn = [...workers.values()].filter((w) => w.diedOnItsOwn !== undefined);
const uncaught = [...workers.values()].reduce((s, w) => s + w.uncaught, 0);
check(
  diedOnTheirOwn.length === 0 && uncaught === 0,
  `no worker died by itself (${
    diedOnTheirOwn.map((w) => `${w.id} code ${w.diedOnItsOwn}`).join(", ") || "none"
  }; ${uncaught} uncaught errors in the logs)`,
);
check(answers.other5xx === 0 && answers.noRetryAfter === 0, "API 5xx during outages: only 503");
if (failures.length) console.log(failures.slice(0, 20).join("\n"));

apiChild.kill("SIGTERM");
await apiChild.status;
await stopAll();
Deno.exit(failures.length ? 1 : 0);
