/**
 * `deno task bench:api-compare --baseline REV [--rounds 3] [--rate 500] [--duration 5]
 * [--connections 16] [--jobs 2000] [--workers 1,4,8]` — the API and queue numbers of
 * `bench:api`, for the working tree and for a baseline git revision, measured in one run on one
 * Postgres, interleaved round by round so that machine load hits both alike (bench/README.md:
 * compare ratios measured in one run). Prints the median over rounds of each number.
 *
 * The baseline's `api/`, `jobs/` and `migrations/` are extracted with
 * `git archive` into a temporary folder (sharing this checkout's node_modules); its API runs as a
 * child process there, and its `claimJob`/`openDatabase` are imported from there. Both sides
 * share one database: the baseline's migrations must be a prefix of the working tree's. Not a
 * test. Example: `deno task bench:api-compare --baseline b7de12c`.
 */
import { benchArgs } from "../_args.ts";
import autocannon from "autocannon";
import { createKey } from "../../jobs/api_keys.ts";
import {
  claimJob,
  type ClaimOptions,
  type Database,
  JobSpecSchema,
  openDatabase,
  startLocalS3,
  submitJob,
} from "../../jobs/mod.ts";
import { startPostgres } from "../../jobs/embedded/postgres_cluster.ts";

/** What `--help` prints. */
const USAGE = `bench:api's numbers for the working tree and a baseline revision, interleaved.

Usage: deno task bench:api-compare --baseline REV [--rounds 3] [--rate 500] [--duration 5]
  [--connections 16] [--jobs 2000] [--workers 1,4,8]

Flags:
  --baseline REV      the git revision to compare with (required)
  --rounds N          rounds, each measuring both sides (default 3)
  --rate N            requests per second of the GET load (default 500)
  --duration S        seconds of each load (default 5)
  --connections N     concurrent connections (default 16)
  --jobs N            jobs queued per claim run (default 2000)
  --workers A,B       claiming worker counts (default 1,4,8)`;

const args = benchArgs({
  name: "bench:api-compare",
  usage: USAGE,
  options: {
    baseline: { type: "string" },
    rounds: { type: "string", default: "3" },
    rate: { type: "string", default: "500" },
    duration: { type: "string", default: "5" },
    connections: { type: "string", default: "16" },
    jobs: { type: "string", default: "2000" },
    workers: { type: "string", default: "1,4,8" },
  },
});
if (!args.baseline) throw new Error("Cannot compare as --baseline must name a git revision");
const rounds = Number(args.rounds);
const jobsPerRun = Number(args.jobs);
const workerCounts = args.workers!.split(",").map(Number);
const root = new URL("../..", import.meta.url).pathname;

/** Extracts the baseline revision's service folders next to a link to our node_modules. */
async function extractBaseline(rev: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "seed-baseline-" });
  const paths = ["api", "jobs", "migrations", "deno.json", "deno.lock"];
  const archive = new Deno.Command("git", {
    args: ["archive", "--format=tar", rev, ...paths],
    cwd: root,
    stdout: "piped",
  }).spawn();
  const untar = new Deno.Command("tar", { args: ["-x", "-C", dir], stdin: "piped" }).spawn();
  await archive.stdout.pipeTo(untar.stdin);
  const [a, t] = [await archive.status, await untar.status];
  if (!a.success || !t.success) throw new Error(`Cannot extract ${rev}: git archive or tar failed`);
  await Deno.symlink(`${root}node_modules`, `${dir}/node_modules`);
  return dir;
}

/** Starts `api/main.ts` of the tree in `cwd` on a free port. */
async function startApi(cwd: string, env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "api/main.ts"],
    cwd,
    env: { ...env, PORT: "0" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  let port = 0;
  while (!port) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`Cannot start the API in ${cwd} as it exited: ${text}`);
    text += value;
    port = Number(text.match(/"api listening".*"port":(\d+)/)?.[1] ?? 0);
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

/** One side of the comparison: its API server and its queue functions. */
interface Side {
  name: string;
  api: { url: string; stop(): Promise<void> };
  db: Database;
  claim: (db: Database, o: ClaimOptions) => Promise<unknown>;
}

/** Queues `n` jobs (with the working tree's submit), then claims them with `workers` loops. */
async function claimsPerSecond(side: Side, tenantId: string, workers: number): Promise<number> {
  const spec = JobSpecSchema.parse({ env: { id: "sokoban" } });
  for (let i = 0; i < jobsPerRun; i += 50) {
    const n = Math.min(50, jobsPerRun - i);
    await Promise.all(Array.from({ length: n }, () => submitJob(side.db, { tenantId, spec })));
  }
  let claimed = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    const o = { workerId: `bench-${side.name}-${w}`, device: "cpu" as const, leaseMs: 60_000 };
    while (await side.claim(side.db, o)) claimed++;
  }));
  const seconds = (performance.now() - start) / 1000;
  if (claimed !== jobsPerRun) throw new Error(`Cannot trust the run: ${claimed} claimed`);
  return claimed / seconds;
}

async function getLatency(url: string, headers: Record<string, string>) {
  const r = await autocannon({
    url,
    headers,
    connections: Number(args.connections),
    duration: Number(args.duration),
    overallRate: Number(args.rate),
  });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`Cannot trust the run: ${r.non2xx} non-2xx`);
  return { p50: r.latency.p50, p99: r.latency.p99, reqPerS: r.requests.average };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const baselineDir = await extractBaseline(args.baseline);
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
const sides: Side[] = [];
try {
  const baseMod = await import(`${baselineDir}/jobs/mod.ts`);
  const db = await openDatabase({ url: pg.url, maxConnections: 16 });
  sides.push({
    name: `baseline ${args.baseline}`,
    api: await startApi(baselineDir, env),
    db: await baseMod.openDatabase({ url: pg.url, maxConnections: 16 }),
    claim: baseMod.claimJob,
  });
  sides.push({ name: "working tree", api: await startApi(root, env), db, claim: claimJob });
  const { key } = await createKey(db, "compare");
  const tenantId = (await db.query<{ id: string }>(
    "select id from tenants where name = 'compare'",
  ))[0].id;
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const job = await submitJob(db, {
    tenantId,
    spec: JobSpecSchema.parse({ env: { id: "sokoban" } }),
  });
  // Out of the claimers' way: GET reads it, claims must find only their own jobs.
  await db.query("update jobs set status = 'cancelled', finished_at = now() where id = $1", [
    job.job.id,
  ]);
  const samples = new Map<string, number[]>();
  const add = (k: string, v: number) => samples.set(k, [...(samples.get(k) ?? []), v]);
  for (const side of sides) await getLatency(`${side.api.url}/v1/jobs/${job.job.id}`, headers);
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 ? [...sides].reverse() : sides) {
      const get = await getLatency(`${side.api.url}/v1/jobs/${job.job.id}`, headers);
      add(`${side.name}|GET p50 ms`, get.p50);
      add(`${side.name}|GET p99 ms`, get.p99);
      add(`${side.name}|GET req/s`, get.reqPerS);
      for (const w of workerCounts) {
        add(`${side.name}|claims/s N=${w}`, await claimsPerSecond(side, tenantId, w));
      }
    }
  }
  const metrics = [...new Set([...samples.keys()].map((k) => k.split("|")[1]))];
  console.log(
    `GET /v1/jobs/{id} at ${args.rate} req/s × ${args.duration} s; ${jobsPerRun} claims per run;` +
      ` median of ${rounds} interleaved rounds`,
  );
  console.log(`${"metric".padEnd(16)}${sides.map((s) => s.name.padStart(24)).join("")}`);
  for (const m of metrics) {
    const cells = sides.map((s) => {
      const xs = samples.get(`${s.name}|${m}`)!;
      return `${median(xs).toFixed(0)} [${xs.map((x) => x.toFixed(0)).join(" ")}]`.padStart(24);
    });
    console.log(`${m.padEnd(16)}${cells.join("")}`);
  }
  await Deno.mkdir(`${root}.bench-out`, { recursive: true });
  await Deno.writeTextFile(
    `${root}.bench-out/api_compare.json`,
    JSON.stringify({
      at: new Date().toISOString(),
      baseline: args.baseline,
      samples: [...samples],
    }),
  );
} finally {
  for (const side of sides) {
    await side.api.stop();
    await side.db.close();
  }
  await s3.stop();
  await pg.stop();
  await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
  await Deno.remove(baselineDir, { recursive: true });
}
