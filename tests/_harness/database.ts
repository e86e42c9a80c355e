/**
 * A fresh, empty database per test file, so files never see each other's rows.
 *
 * Under `deno task test` the harness sets `TEST_DATABASE_URL` (a throwaway cluster); each call
 * creates a new database `t_<random>` on that server and drops it again. Run directly
 * (`deno test -A tests/jobs`), the first call starts a throwaway cluster for this process.
 */
import postgres from "postgres";
import { startPostgres, type ThrowawayPostgres } from "../../jobs/embedded/postgres_cluster.ts";

/** A fresh database: its URL and a function that drops it (and stops a cluster we started). */
export interface TestDatabase {
  /** `postgres://…/t_<random>`. */
  url: string;
  /** Drops the database (terminating leftover connections). Idempotent. */
  drop(): Promise<void>;
}

let ownCluster: Promise<ThrowawayPostgres> | undefined;
let ownClusterUsers = 0;

/** Creates a new empty database on the test server (see module doc). */
export async function createTestDatabase(): Promise<TestDatabase> {
  let serverUrl = Deno.env.get("TEST_DATABASE_URL");
  let cluster: ThrowawayPostgres | undefined;
  if (!serverUrl) {
    ownCluster ??= startPostgres();
    cluster = await ownCluster;
    ownClusterUsers++;
    serverUrl = cluster.url;
  }
  const name = `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`); // name is generated above, not user input
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await sql.end();
      }
      if (cluster && --ownClusterUsers === 0) {
        ownCluster = undefined;
        await cluster.stop();
      }
    },
  };
}
