/**
 * The embedded infrastructure: what lets every process started in one `SEED_DATA_DIR` share a
 * database and an object store on one machine with nothing installed (no `DATABASE_URL`, no
 * `S3_ENDPOINT`). Production uses real Postgres and S3 instead; the job domain (`jobs/`) talks to
 * both through the same surfaces (`jobs/postgres.ts`'s `Database`, `jobs/store.ts`'s
 * `ArtifactStore`), so one code path serves both.
 *
 * - `pglite.ts`: the embedded database. The first process to open a folder owns it (lock file
 *   `pg.lock` with pid, start time and port), runs PGlite and serves it on loopback over the
 *   Postgres wire protocol (`_pglite_server.ts`, multiplexed per transaction, LISTEN/NOTIFY fanned
 *   out); later processes connect with postgres.js and take over when the owner exits.
 * - `local_s3.ts`: the embedded object store, s3rver on loopback over `s3/`, found through
 *   `s3.json`, started under `s3.lock`, behind a front that checks every request's AWS SigV4
 *   signature (`_sigv4.ts`).
 * - `_secret_file.ts`: the folder's secrets (`pg.secret`, `s3.secret`, mode 0600), so other users
 *   of the machine cannot connect to either server.
 *
 * Direction: this folder imports `jobs/postgres.ts` and `jobs/schema.ts` only; `jobs/db.ts` and
 * `jobs/store.ts` import it. jobs/README.md, "Running in production", says how the sharing behaves.
 */
export { EmbeddedDatabaseBusyError, openPglite } from "./pglite.ts";
export {
  ensureLocalS3,
  LOCAL_S3_CREDENTIALS,
  type LocalS3,
  type LocalS3Credentials,
  localS3Credentials,
  startLocalS3,
} from "./local_s3.ts";
