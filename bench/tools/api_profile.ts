/**
 * `deno run -A bench/tools/api_profile.ts` — in-process cost of one `GET /v1/jobs/{id}` and its
 * parts (auth lookup, job select), sequential, no HTTP: separates handler cost from network and
 * load.
 */
import { createKey } from "../../jobs/api_keys.ts";
import { createApp } from "../../api/app.ts";
import { getJob } from "../../api/queries.ts";
import { openDatabase, openStore, startLocalS3 } from "../../jobs/mod.ts";
import { startPostgres } from "../../jobs/embedded/postgres_cluster.ts";
import { benchArgs } from "../_args.ts";

benchArgs({
  name: "bench/tools/api_profile.ts",
  usage: `In-process cost of one GET /v1/jobs/{id} and its parts, no HTTP.

Usage: deno run -A bench/tools/api_profile.ts   (no flags)`,
  options: {},
});
const pg = await startPostgres();
const dir = await Deno.makeTempDir();
const s3 = await startLocalS3({ directory: dir });
const db = await openDatabase({ url: pg.url }).catch(async (e) => {
  await pg.stop();
  throw e;
});
const store = await openStore({
  endpoint: s3.endpoint,
  bucket: "profile",
  accessKeyId: "S3RVER",
  secretAccessKey: "S3RVER",
});
try {
  const { key } = await createKey(db, "p");
  const app = createApp({ db, store });
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const job = await (await app.request("/v1/jobs", {
    method: "POST",
    headers,
    body: JSON.stringify({ env: { id: "sokoban" } }),
  })).json();
  const tenantId =
    (await db.query<{ id: string }>("select id from tenants where name = 'p'"))[0].id;
  const time = async (name: string, n: number, fn: () => Promise<unknown>) => {
    for (let i = 0; i < 50; i++) await fn();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await fn();
    console.log(`${name.padEnd(28)} ${((performance.now() - t0) / n * 1000).toFixed(0)} µs`);
  };
  await time("select 1 (raw)", 500, () => db.query("select 1"));
  await time("api getJob (one select)", 500, () => getJob(db, tenantId, job.id));
  await time("GET /v1/jobs/{id} in-process", 500, async () => {
    const r = await app.request(`/v1/jobs/${job.id}`, { headers });
    await r.arrayBuffer();
  });
  await time("GET /healthz in-process", 500, async () => {
    await (await app.request("/healthz")).arrayBuffer();
  });
} finally {
  await store.close();
  await db.close();
  await s3.stop();
  await pg.stop();
  await Deno.remove(dir, { recursive: true });
}
