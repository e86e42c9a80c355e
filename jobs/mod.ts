/**
 * The job domain shared by `api/` and `workers/` (DESIGN.md §2): the JobSpec, the database schema
 * and connection, the queue, events and metrics, and the artifact store.
 */
export * from "./spec.ts";
export * from "./schema.ts";
export {
  type Database,
  dataDirFromEnv,
  EmbeddedDatabaseBusyError,
  MIGRATIONS_DIR,
  openDatabase,
  type OpenOptions,
  type Orm,
  type Queryable,
} from "./db.ts";
