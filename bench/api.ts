/**
 * `deno task bench:api` (flags: `USAGE` below, which `--help` prints) — API latency under a fixed
 * request rate, and queue claims per second.
 *
 * Starts a throwaway Postgres (jobs/embedded/postgres_cluster.ts) and an S3 server, runs
 * `api/main.ts` in a child process (so the load generator does not share its event loop), then
 * drives `GET /v1/jobs/{id}` and `POST /v1/jobs` with autocannon at `--rate` requests/s for
 * `--duration` s each and prints p50/p99 latency and throughput. Then queues `--jobs` jobs and
 * times N concurrent claim loops (jobs/ `claimJob`, the worker's SKIP LOCKED statement) for each
 * N of `--workers`. Goals (bench/README.md): GET p99 < 10 ms at 500 req/s; ≥ 1,000 claims/s.
 * Not a test: numbers depend on the machine; compare runs on one machine only.
 */
import autocannon from "autocannon";
import { createKey } from "../jobs/api_keys.ts";
import {
  claimJob,
  type Database,
  JobSpecSchema,
  openDatabase,
  startLocalS3,
  submitJob,
} from "../jobs/mod.ts";
import { startPostgres } from "../jobs/embedded/postgres_cluster.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `API latency under a fixed request rate, and queue claims per second (goals in
bench/README.md: GET p99 < 10 ms at 500 req/s; >= 1,000 claims/s).

Usage:
  deno task bench:api [--rate 500] [--duration 10] [--connections 16] [--jobs 3000]
    [--workers 1,4,8]

Flags:
  --rate N         requests per second autocannon sends to GET /v1/jobs/{id}, then to
                   POST /v1/jobs (default 500)
  --duration S     seconds of load on each (default 10)
  --connections N  autocannon's concurrent connections (default 16)
  --jobs N         jobs queued before each claim measurement (default 3000)
  --workers A,B    concurrent claim loops to time, one measurement per number (default 1,4,8)`;

const args = benchArgs({
  name: "bench:api",
  usage: USAGE,
  options: {
    rate: { type: "string", default: "500" },
    duration: { type: "string", default: "10" },
    connections: { type: "string", default: "16" },
    jobs: { type: "string", default: "3000" },
    workers: { type: "string", default: "1,4,8" },
  },
});
const rate = Number(args.rate);
const duration = Number(args.duration);
const connections = Number(args.connections);

/** One load run's summary (latencies in ms, autocannon's 1 ms resolution). */
interface LoadResult {
  name: string;
  rate: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  reqPerS: number;
  non2xx: number;
  errors: number;
}

async function load(
  name: string,
  opts: { url: string; method?: "GET" | "POST"; body?: string; headers: Record<string, string> },
): Promise<LoadResult> {
  const r = await autocannon({
    url: opts.url,
    method: opts.method ?? "GET",
    body: opts.body,
    headers: opts.headers,
    connections,
    duration,
    overallRate: rate,
  });
  return {
    name,
    rate,
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    max: r.latency.max,
    reqPerS: r.requests.average,
    non2xx: r.non2xx,
    errors: r.errors,
  };
}

async function startApi(
  env: Record<string, string>,
): Promise<{ url: string; stop(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "api/main.ts"],
    env: { ...env, PORT: "0" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  let port = 0;
  while (!port) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`Cannot start the API as it exited: ${text}`);
    text += value;
    const m = text.match(/"api listening".*"port":(\d+)/);
    if (m) port = Number(m[1]);
  }
  (async () => {
    while (!(await reader.read()).done) { /* drain */ }
  })();
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

async function claimsPerSecond(db: Database, jobs: number, workers: number): Promise<number> {
  const spec = JobSpecSchema.parse({ env: { id: "sokoban" } });
  const tenantId = (await db.query<{ id: string }>(
    "insert into tenants (name) values ($1) returning id",
    [`claims-${crypto.randomUUID()}`],
  ))[0].id;
  for (let i = 0; i < jobs; i += 50) {
    const n = Math.min(50, jobs - i);
    await Promise.all(Array.from({ length: n }, () => submitJob(db, { tenantId, spec })));
  }
  let claimed = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    for (;;) {
      const job = await claimJob(db, { workerId: `bench-${w}`, device: "cpu", leaseMs: 60_000 });
      if (!job) return;
      claimed++;
    }
  }));
  const seconds = (performance.now() - start) / 1000;
  if (claimed !== jobs) {
    throw new Error(`Cannot trust the claim run: ${claimed} of ${jobs} claimed`);
  }
  return claimed / seconds;
}

const pg = await startPostgres();
const s3Dir = await Deno.makeTempDir({ prefix: "seed-bench-s3-" });
const s3 = await startLocalS3({ directory: s3Dir });
const env = {
  DATABASE_URL: pg.url,
  S3_ENDPOINT: s3.endpoint,
  S3_BUCKET: "bench",
  S3_ACCESS_KEY_ID: "S3RVER",
  S3_SECRET_ACCESS_KEY: "S3RVER",
};
const db = await openDatabase({ url: pg.url, maxConnections: 16 });
try {
  const { key } = await createKey(db, "bench");
  const api = await startApi(env);
  const results: LoadResult[] = [];
  const claims: { workers: number; claimsPerS: number }[] = [];
  try {
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const body = JSON.stringify({ env: { id: "sokoban" } });
    const created = await fetch(`${api.url}/v1/jobs`, { method: "POST", headers, body });
    const { id } = await created.json();
    const warm = await autocannon({
      url: `${api.url}/v1/jobs/${id}`,
      headers,
      connections,
      duration: 2,
      overallRate: rate,
    });
    if (warm.non2xx > 0) throw new Error("Cannot benchmark as the warm-up got non-2xx answers");
    results.push(await load("GET /v1/jobs/{id}", { url: `${api.url}/v1/jobs/${id}`, headers }));
    results.push(
      await load("POST /v1/jobs", { url: `${api.url}/v1/jobs`, method: "POST", body, headers }),
    );
  } finally {
    await api.stop();
  }
  await db.query(
    "update jobs set status = 'cancelled', finished_at = now() where status = 'queued'",
  );
  for (const w of args.workers!.split(",").map(Number)) {
    claims.push({ workers: w, claimsPerS: await claimsPerSecond(db, Number(args.jobs), w) });
  }
  console.log(`API latency at ${rate} req/s for ${duration} s, ${connections} connections:`);
  console.log("route                  p50 ms  p90 ms  p99 ms  max ms   req/s  non2xx  errors");
  for (const r of results) {
    console.log(
      `${r.name.padEnd(22)} ${String(r.p50).padStart(6)}  ${String(r.p90).padStart(6)}  ${
        String(r.p99).padStart(6)
      }  ${String(r.max).padStart(6)}  ${r.reqPerS.toFixed(0).padStart(6)}  ${
        String(r.non2xx).padStart(6)
      }  ${String(r.errors).padStart(6)}`,
    );
  }
  console.log(`Queue claims (${args.jobs} jobs queued, claimJob in N concurrent loops):`);
  for (const c of claims) console.log(`  N=${c.workers}: ${c.claimsPerS.toFixed(0)} claims/s`);
  await Deno.mkdir(".bench-out", { recursive: true });
  await Deno.writeTextFile(
    ".bench-out/api.json",
    JSON.stringify({ at: new Date().toISOString(), results, claims }, null, 2),
  );
} finally {
  await db.close();
  await s3.stop();
  await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
  await pg.stop();
}
