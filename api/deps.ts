/**
 * What `createApp` needs: the database, the artifact store, and optional hooks. The API never
 * imports workers/: the environment list and the semantic check of a spec come in as functions.
 */
import type { Database, JobSpec } from "../jobs/mod.ts";
import type { ArtifactStore } from "../jobs/store.ts";
import type { ErrorMapper } from "./errors.ts";
import type { EnvInfo } from "./schemas.ts";

/**
 * The artifact store methods the API uses (jobs/store.ts `ArtifactStore` satisfies it): streamed
 * and verified reads, presigned GET URLs, and the raw client for the readiness probe.
 */
export type ArtifactReader = Pick<
  ArtifactStore,
  "getStream" | "get" | "presignGet" | "bucket" | "send"
>;

/**
 * Semantic check of a parsed spec for the submitting tenant (e.g. "is env.id known?").
 * Throw `UnprocessableError` (422) to refuse it; resolve to accept.
 */
export type SpecCheck = (spec: JobSpec, ctx: { tenantId: string }) => void | Promise<void>;

/** Options of `createApp`. */
export interface AppOptions {
  /** The open database (jobs/db.ts `openDatabase`). */
  db: Database;
  /** The artifact store (jobs/store.ts `openStore`). */
  store: ArtifactReader;
  /**
   * Lists the environments workers offer for `GET /v1/envs`; default: an empty list. `api/main.ts`
   * passes nothing (the API must not import workers/); a deployment that wants the list wires a
   * provider here (e.g. one that reads it from a worker-published table or file).
   */
  envs?: () => EnvInfo[] | Promise<EnvInfo[]>;
  /** Extra 422 checks of submitted specs; by default, when `envs` lists any, env.id must be one of them. */
  checkSpec?: SpecCheck;
  /** Largest request body, bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** Seconds an auth lookup is cached (default 2). */
  authCacheMs?: number;
  /** SSE: poll interval when no NOTIFY arrives (default 500 ms) and keepalive interval. */
  sse?: { pollMs?: number; keepaliveMs?: number };
  /** Maps domain errors of jobs/ to problems (in addition to the built-in mapping). */
  mapError?: ErrorMapper;
  /** Structured log sink for 5xx errors (default: `console.error` of one JSON line). */
  log?: (record: Record<string, unknown>) => void;
}
