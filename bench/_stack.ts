/**
 * The throwaway service stack of the serving benchmarks (bench/serve.ts, bench/_serve_rollout.ts):
 * a real Postgres cluster (jobs/embedded/postgres_cluster.ts) and an s3rver over a temporary
 * folder, with the database and store clients open on them.
 */
import {
  ArtifactStore,
  type Database,
  openDatabase,
  openStore,
  startLocalS3,
} from "../jobs/mod.ts";
import { startPostgres } from "../jobs/embedded/postgres_cluster.ts";

/** A running stack; `stop` closes the clients, stops both servers and removes the S3 folder. */
export interface BenchStack {
  /** The variables a child process (`deno task serve`, a worker) needs to reach the stack. */
  env: {
    DATABASE_URL: string;
    S3_ENDPOINT: string;
    S3_BUCKET: string;
    S3_ACCESS_KEY_ID: string;
    S3_SECRET_ACCESS_KEY: string;
  };
  db: Database;
  store: ArtifactStore;
  stop(): Promise<void>;
}

/**
 * Starts Postgres and an S3 server with bucket `bucket`. Throws when `initdb`/`pg_ctl` are missing
 * or a server does not start (nothing is left running then).
 */
export async function startBenchStack(bucket: string): Promise<BenchStack> {
  const pg = await startPostgres();
  const s3Dir = await Deno.makeTempDir({ prefix: `seed-${bucket}-s3-` });
  const s3 = await startLocalS3({ directory: s3Dir }).catch(async (error) => {
    await pg.stop();
    throw error;
  });
  const env = {
    DATABASE_URL: pg.url,
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: bucket,
    S3_ACCESS_KEY_ID: "S3RVER",
    S3_SECRET_ACCESS_KEY: "S3RVER",
  };
  const db = await openDatabase({ url: pg.url });
  const store = await openStore({
    endpoint: env.S3_ENDPOINT,
    bucket: env.S3_BUCKET,
    accessKeyId: env.S3_ACCESS_KEY_ID,
    secretAccessKey: env.S3_SECRET_ACCESS_KEY,
  });
  return {
    env,
    db,
    store,
    async stop() {
      await store.close();
      await db.close();
      await s3.stop();
      await pg.stop();
      await Deno.remove(s3Dir, { recursive: true }).catch(() => {});
    },
  };
}
