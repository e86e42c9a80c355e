/**
 * `deno task api`: opens the database (`DATABASE_URL`, else embedded PGlite under
 * `SEED_DATA_DIR`; migrations run on open) and the artifact store (`S3_ENDPOINT`…, else the
 * embedded S3 server), then serves the API on `HOST:PORT` (default 127.0.0.1:8787). SIGINT and
 * SIGTERM stop accepting requests, finish the ones in flight (for at most
 * {@link SHUTDOWN_GRACE_MS}: an event stream never finishes by itself, its client reconnects with
 * `Last-Event-ID`) and close both. A second signal more than `SAME_PRESS_MS` after the first
 * exits at once; signals within it are one Ctrl-C delivered twice (jobs/stop_signals.ts). With
 * `SEED_EXIT_WITH_PARENT=1` (set by `deno task demo` for its children) the end of stdin, a pipe
 * from the parent, stops it as the first signal does: it ends with its parent, even a parent
 * killed with SIGKILL (jobs/exit_with_parent.ts).
 *
 * `GET /v1/envs` serves, and `POST /v1/jobs` checks `env` against, the built-in catalog
 * (jobs/env_catalog.json, generated from workers/envs: the API does not import workers/; README.md,
 * Architecture). A deployment with other environments passes an `envs` provider to `createApp`.
 */
import {
  type ArtifactStore,
  type Database,
  DEFAULT_SWEEP_GRACE_MS,
  DEFAULT_SWEEP_INTERVAL_MS,
  exitWithParentFromEnv,
  onStopSignals,
  openDatabase,
  openStore,
  startSweeper,
  type Sweeper,
} from "../jobs/mod.ts";
import { checkUploadedModel } from "../workers/model/upload_check.ts";
import { createApp } from "./app.ts";
import type { ModelCheck } from "./deps.ts";

/**
 * The format check of uploaded models: the one place the server imports workers/ (a pure module
 * that parses config.json, safetensors headers and tokenizer.json; no engine, no sessions).
 */
export const checkModel: ModelCheck = (files) => {
  const r = checkUploadedModel(files);
  return {
    architecture: r.config.architecture,
    configJson: r.configJson,
    parameterCount: r.parameterCount,
  };
};

/**
 * How long a stopping API waits for requests in flight, ms, before it closes the store and the
 * database under them (open event streams are then cut; their clients reconnect).
 */
export const SHUTDOWN_GRACE_MS = 10_000;

/** What {@link serveApi} started. */
export interface RunningApi {
  /** Actual port (useful with `port: 0`). */
  port: number;
  /**
   * Stops accepting connections, waits for requests in flight for at most `graceMs` (default
   * {@link SHUTDOWN_GRACE_MS}), then closes the store and the database.
   */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The orphan sweeper of jobs/sweeper.ts on the timer of `SWEEPER_INTERVAL_MS` (default 1 h; 0
 * turns it off) with the grace of `SWEEPER_GRACE_MS` (default 24 h); each sweep that removed
 * something, and each that failed, is one log line.
 */
function startApiSweeper(db: Database, store: ArtifactStore): Sweeper | undefined {
  const ms = (name: string, fallback: number) => {
    const raw = Deno.env.get(name);
    const value = raw === undefined || raw === "" ? fallback : Number(raw);
    if (!Number.isInteger(value) || value < 0) {
      throw new RangeError(
        `Cannot start the API as ${name} must be a non-negative integer of milliseconds: current value is ${raw}`,
      );
    }
    return value;
  };
  const intervalMs = ms("SWEEPER_INTERVAL_MS", DEFAULT_SWEEP_INTERVAL_MS);
  const graceMs = ms("SWEEPER_GRACE_MS", DEFAULT_SWEEP_GRACE_MS);
  if (intervalMs === 0) return undefined;
  const log = (level: string, msg: string, fields: Record<string, unknown>) =>
    console.error(JSON.stringify({ level, msg, ...fields }));
  return startSweeper(db, store, {
    intervalMs,
    graceMs,
    onSwept: (r) => {
      if (r.objects + r.multipartUploads > 0) log("info", "orphan objects removed", { ...r });
    },
    onError: (e) =>
      log("warn", "orphan sweep failed; retrying at the next interval", { e: String(e) }),
  });
}

/** Opens db and store and serves the API; `port` 0 picks a free one. */
export async function serveApi(
  options: { hostname?: string; port?: number; maxBodyBytes?: number } = {},
): Promise<RunningApi> {
  const db = await openDatabase();
  const store = await openStore();
  const sweeper = startApiSweeper(db, store);
  const app = createApp({
    db,
    store,
    maxBodyBytes: options.maxBodyBytes,
    checkModel,
    sweeperTotals: sweeper?.totals,
    metricsToken: Deno.env.get("SEED_METRICS_TOKEN") || undefined,
  });
  const server = Deno.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 8787,
    onListen: () => {},
  }, app.fetch);
  return {
    port: server.addr.port,
    async stop(graceMs = SHUTDOWN_GRACE_MS) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((resolve) => timer = setTimeout(resolve, graceMs));
      await Promise.race([server.shutdown(), grace]);
      clearTimeout(timer);
      await sweeper?.stop();
      await store.close();
      await db.close();
    },
  };
}

if (import.meta.main) {
  const port = Number(Deno.env.get("PORT") ?? 8787);
  const hostname = Deno.env.get("HOST") ?? "127.0.0.1";
  const cannotStart = (e: unknown): never => {
    // A bad setting (e.g. S3_BUCKET) or a dependency that refuses: one line, no stack trace.
    const error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    console.error(JSON.stringify({ level: "error", msg: "the api cannot start", error }));
    Deno.exit(1);
  };
  let exitWithParent = false;
  try {
    exitWithParent = exitWithParentFromEnv();
  } catch (e) {
    cannotStart(e);
  }
  const api = await serveApi({ hostname, port }).catch(cannotStart);
  console.error(JSON.stringify({ level: "info", msg: "api listening", hostname, port: api.port }));
  onStopSignals(
    {
      first: () => {
        console.error(JSON.stringify({
          level: "info",
          msg: "stopping: finishing requests in flight",
          graceMs: SHUTDOWN_GRACE_MS,
        }));
        api.stop().then(() => Deno.exit(0));
      },
      again: () => {
        console.error(JSON.stringify({ level: "warn", msg: "second signal: exiting now" }));
        Deno.exit(130);
      },
    },
    undefined,
    { exitWithParent },
  );
}
