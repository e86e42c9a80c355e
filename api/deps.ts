/**
 * What `createApp` needs: the database, the artifact store, and optional hooks. The API never
 * imports workers/: the environment list and the semantic check of a spec come in as functions.
 */
import {
  type Database,
  ENV_CATALOG,
  type JobSpec,
  type Logger,
  type SecretCipher,
  type SweepTotals,
} from "../jobs/mod.ts";
import type { ArtifactStore } from "../jobs/store.ts";
import type { ErrorMapper } from "./errors.ts";
import type { EnvInfo } from "./schemas.ts";
import type { ModelUploadLimits } from "./model_upload.ts";

/**
 * The artifact store methods the API uses (jobs/store.ts `ArtifactStore` satisfies it): streamed
 * and verified reads, presigned GET URLs, and the raw client for the readiness probe.
 */
export type ArtifactReader = Pick<
  ArtifactStore,
  "getStream" | "get" | "presignGet" | "bucket" | "send" | "put" | "putStream" | "delete" | "list"
>;

/**
 * The format check of an uploaded model folder (`POST /v1/models`): given its small files and
 * its safetensors headers, answers its architecture, config.json and parameter count, or throws
 * an error with string `file` and `field` properties (a 422 naming them; the upload is
 * discarded). api/main.ts wires workers/model/upload_check.ts `checkUploadedModel`.
 */
export type ModelCheck = (files: {
  small: ReadonlyMap<string, Uint8Array>;
  safetensors: ReadonlyMap<string, { header: Record<string, unknown>; dataBytes: number }>;
}) => { architecture: string; configJson: Record<string, unknown>; parameterCount: number };

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
   * Lists the environments workers offer, for `GET /v1/envs` and the submit-time check of `env`
   * (id known, options valid under the entry's `options_schema`); default: the built-in catalog
   * (`ENV_CATALOG`, jobs/env_catalog.json, generated from workers/envs). A provider returning an
   * empty list turns the check off.
   */
  envs?: EnvsProvider;
  /** Extra 422 checks of submitted specs, run after the env check. */
  checkSpec?: SpecCheck;
  /**
   * Encrypts tenant secrets (`PUT /v1/secrets/{name}`); default jobs/secrets.ts
   * `secretCipherFromEnv()` (`SEED_SECRETS_KEY`, or the key file of `SEED_DATA_DIR`), made on the
   * first PUT.
   */
  secretCipher?: SecretCipher;
  /** Checks uploaded models; without it `POST /v1/models` answers 501. */
  checkModel?: ModelCheck;
  /** The orphan sweeper's counters, shown on `/metrics` as `seed_orphan_*` (jobs/sweeper.ts). */
  sweeperTotals?: SweepTotals;
  /** Limits of `POST /v1/models` (api/model_upload.ts defaults: 64 GiB, 64 MiB small files). */
  modelUploadLimits?: Partial<ModelUploadLimits>;
  /** Largest request body, bytes (default 1 MiB; `POST /v1/models` has its own limits). */
  maxBodyBytes?: number;
  /** Seconds an auth lookup is cached (default 2). */
  authCacheMs?: number;
  /** SSE: poll interval when no NOTIFY arrives (default 500 ms) and keepalive interval. */
  sse?: { pollMs?: number; keepaliveMs?: number };
  /** Maps domain errors of jobs/ to problems (in addition to the built-in mapping). */
  mapError?: ErrorMapper;
  /**
   * Operator key of `GET /metrics` (its counts span every tenant): the request must carry
   * `Authorization: Bearer <key>`. Absent (api/main.ts: `SEED_METRICS_TOKEN` unset), `/metrics`
   * answers 404.
   */
  metricsToken?: string;
  /**
   * The log of 5xx answers and of event streams' internal errors (default: jobs/logger.ts
   * `createLogger({ service: "api" })`, JSON lines on stderr at `LOG_LEVEL`).
   */
  log?: Logger;
}

/** The environment list provider of {@link AppOptions.envs}. */
export type EnvsProvider = () => EnvInfo[] | Promise<EnvInfo[]>;

/** `options.envs`, or the built-in catalog (jobs/env_catalog.json) when none is given. */
export function envsOf(options: Pick<AppOptions, "envs">): EnvsProvider {
  return options.envs ?? (() => ENV_CATALOG.envs);
}
