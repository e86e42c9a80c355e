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
 * Its variables ({@link ApiSettings}: `HOST`, `PORT`, `SWEEPER_INTERVAL_MS`, `SWEEPER_GRACE_MS`,
 * `LOG_LEVEL`) are read before anything is opened; a bad one stops it with one log line naming each
 * bad variable, its rule and its value, and exit status 1, as the worker does: `Cannot start the
 * API as PORT must be a whole number from 0 to 65535: current value is "abc"`.
 *
 * It logs through the service's one logger (jobs/logger.ts), as the worker does, with `service`
 * "api": JSON lines on stderr,
 * `{"time":"2025-01-01T12:00:00.000Z","level":"info","msg":"api listening","service":"api",…}`.
 *
 * `GET /v1/envs` serves, and `POST /v1/jobs` checks `env` against, the built-in catalog
 * (jobs/env_catalog.json, generated from workers/envs: the API does not import workers/; README.md,
 * Architecture). A deployment with other environments passes an `envs` provider to `createApp`.
 */
import { z } from "zod";
import {
  type ArtifactStore,
  createLogger,
  type Database,
  DEFAULT_SWEEP_GRACE_MS,
  DEFAULT_SWEEP_INTERVAL_MS,
  exitWithParentFromEnv,
  type Logger,
  LogLevelSetting,
  onStopSignals,
  openDatabase,
  openStore,
  readSettings,
  settingsErrorMessage,
  startSweeper,
  type Sweeper,
  wholeNumberSetting,
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
 * Longest `SWEEPER_INTERVAL_MS`, ms: 7 days, within what a timer holds (2^31 − 1 ms, about 24.8
 * days; a longer delay fires at once, so a sweep would run without pause).
 */
export const MAX_SWEEP_INTERVAL_MS = 7 * 24 * 3600_000;

/**
 * Shortest `SWEEPER_GRACE_MS`, ms: 1 hour. Objects are stored before the row that owns them
 * commits (a checkpoint's files before its row, a model upload's first file before its last one
 * arrives), so a sweep with a shorter grace would delete the objects of saves and uploads still in
 * flight: at 0, every one a sweep finds. An hour is longer than a checkpoint save (seconds) and a
 * model upload over a data-centre link (64 GiB at 100 MB/s: 11 min); slower uploads need more
 * (jobs/README.md, "Orphan sweeper").
 */
export const MIN_SWEEP_GRACE_MS = 3600_000;

/** Longest `SWEEPER_GRACE_MS`, ms: 365 days. */
export const MAX_SWEEP_GRACE_MS = 365 * 24 * 3600_000;

const SettingsSchema = z.object({
  HOST: z.string({ error: "a host name or address" }).default("127.0.0.1"),
  PORT: wholeNumberSetting(0, 65535).default(8787),
  SWEEPER_INTERVAL_MS: wholeNumberSetting(0, MAX_SWEEP_INTERVAL_MS, { unit: "ms" })
    .default(DEFAULT_SWEEP_INTERVAL_MS),
  SWEEPER_GRACE_MS: wholeNumberSetting(MIN_SWEEP_GRACE_MS, MAX_SWEEP_GRACE_MS, { unit: "ms" })
    .default(DEFAULT_SWEEP_GRACE_MS),
  LOG_LEVEL: LogLevelSetting.default("info"),
});

/**
 * The API's start-up settings, from the environment; an empty variable counts as unset.
 *
 * | variable              | default    | meaning                                                  |
 * | --------------------- | ---------- | -------------------------------------------------------- |
 * | `HOST`                | 127.0.0.1  | listen address                                           |
 * | `PORT`                | 8787       | listen port, 0 to 65535 (0: a free one, logged at start) |
 * | `SWEEPER_INTERVAL_MS` | 3600000    | ms between orphan sweeps, 0 to 7 days (0: no sweeper)    |
 * | `SWEEPER_GRACE_MS`    | 86400000   | ms an object without a row is kept, 1 hour to 365 days   |
 * | `LOG_LEVEL`           | info       | log threshold: debug, info, warn or error (any case)     |
 */
export type ApiSettings = z.infer<typeof SettingsSchema>;

/**
 * Reads {@link ApiSettings} from `env`: whole numbers as decimal digits only (`1e3`, `0x10`, ` 8`
 * and `-1` are refused, jobs/settings.ts `wholeNumberSetting`).
 * @throws z.ZodError with an issue per bad variable: its path is the variable's name, its message
 *   the rule the value breaks; {@link apiSettingsErrorMessage} makes it one line.
 */
export function apiSettingsFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): ApiSettings {
  return readSettings(SettingsSchema, env);
}

/**
 * The one line an API that cannot start logs for an error of {@link apiSettingsFromEnv}: `Cannot
 * start the API as PORT must be a whole number from 0 to 65535: current value is "abc"`, then `;
 * NAME must be …` for each other bad variable (jobs/settings.ts `settingsErrorMessage`, as the
 * worker's and the inference server's).
 */
export function apiSettingsErrorMessage(
  error: z.ZodError,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): string {
  return settingsErrorMessage("the API", error, env);
}

/**
 * The orphan sweeper of jobs/sweeper.ts every `intervalMs` (0: none) with the grace `graceMs`;
 * each sweep that removed something, and each that failed, is one log line.
 */
function startApiSweeper(
  db: Database,
  store: ArtifactStore,
  { intervalMs, graceMs, log }: { intervalMs: number; graceMs: number; log: Logger },
): Sweeper | undefined {
  if (intervalMs === 0) return undefined;
  return startSweeper(db, store, {
    intervalMs,
    graceMs,
    onSwept: (r) => {
      if (r.objects + r.multipartUploads > 0) log.info("orphan objects removed", { ...r });
    },
    onError: (e) =>
      log.warn("orphan sweep failed; retrying at the next interval", { e: String(e) }),
  });
}

/**
 * Opens db and store and serves the API; `port` 0 picks a free one. The sweeper's interval and
 * grace are `options.sweeper`'s, else the environment's (`SWEEPER_INTERVAL_MS`,
 * `SWEEPER_GRACE_MS`); it logs to `options.log` (default: jobs/logger.ts
 * `createLogger({ service: "api" })`).
 * @throws z.ZodError for a bad variable of {@link ApiSettings} (a sweeper's, `LOG_LEVEL`) when
 *   `options.sweeper` is not given (before anything is opened; {@link apiSettingsFromEnv}).
 * @throws RangeError naming `LOG_LEVEL` when `options.sweeper` is given, `options.log` is not, and
 *   its value is not a level (before anything is opened).
 */
export async function serveApi(
  options: {
    hostname?: string;
    port?: number;
    maxBodyBytes?: number;
    sweeper?: { intervalMs: number; graceMs: number };
    log?: Logger;
  } = {},
): Promise<RunningApi> {
  const sweeperTiming = options.sweeper ?? (() => {
    const s = apiSettingsFromEnv();
    return { intervalMs: s.SWEEPER_INTERVAL_MS, graceMs: s.SWEEPER_GRACE_MS };
  })();
  const log = options.log ?? createLogger({ service: "api" });
  const db = await openDatabase();
  const store = await openStore();
  const sweeper = startApiSweeper(db, store, { ...sweeperTiming, log });
  const app = createApp({
    db,
    store,
    log,
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

/**
 * Logs why the API cannot start to `log`, one line without a stack trace (a bad variable as
 * {@link apiSettingsErrorMessage} writes it; another error, such as a bad `S3_BUCKET` or a
 * dependency that refuses, as `Name: message`), and exits with status 1.
 */
function cannotStart(log: Logger, e: unknown): never {
  const error = e instanceof z.ZodError
    ? apiSettingsErrorMessage(e)
    : e instanceof Error
    ? `${e.name}: ${e.message}`
    : String(e);
  log.error("the api cannot start", { error });
  Deno.exit(1);
}

if (import.meta.main) {
  let settings: ApiSettings, exitWithParent: boolean;
  try {
    settings = apiSettingsFromEnv();
    exitWithParent = exitWithParentFromEnv();
  } catch (e) {
    // LOG_LEVEL may be the bad variable: this one line is an error, shown at every level.
    cannotStart(createLogger({ service: "api" }, { level: "error" }), e);
  }
  const log = createLogger({ service: "api" }, { level: settings.LOG_LEVEL });
  const { HOST: hostname, PORT: port } = settings;
  const api = await serveApi({
    hostname,
    port,
    sweeper: { intervalMs: settings.SWEEPER_INTERVAL_MS, graceMs: settings.SWEEPER_GRACE_MS },
    log,
  }).catch((e) => cannotStart(log, e));
  log.info("api listening", { hostname, port: api.port });
  onStopSignals(
    {
      first: () => {
        log.info("stopping: finishing requests in flight", { graceMs: SHUTDOWN_GRACE_MS });
        api.stop().then(() => Deno.exit(0));
      },
      again: () => {
        log.warn("second signal: exiting now");
        Deno.exit(130);
      },
    },
    undefined,
    { exitWithParent },
  );
}
