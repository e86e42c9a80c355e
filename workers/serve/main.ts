/**
 * `deno task serve`: the OpenAI-compatible inference server for trained checkpoints. Opens the
 * database (`DATABASE_URL`, else embedded PGlite in `SEED_DATA_DIR`) and the artifact store
 * (`S3_*`, else the embedded server) as every other process does, and serves app.ts on
 * `SERVE_HOST:SERVE_PORT`. SIGINT/SIGTERM stop accepting requests, finish the ones in flight and
 * close both. It runs beside the job API and the workers and is never imported by `api/`. A bad
 * variable stops it at start with one log line naming the variable, its allowed values and its
 * value (exit 1); an empty variable counts as unset (its default).
 *
 * | variable                   | default     | meaning                                               |
 * | -------------------------- | ----------- | ----------------------------------------------------- |
 * | `SERVE_HOST`, `SERVE_PORT` | 127.0.0.1, 8788 | listen address (`SERVE_PORT=0`: a free port)      |
 * | `SERVE_MAX_BATCH`          | 32          | sequences decoded together (over all models)          |
 * | `SERVE_MAX_QUEUE`          | 64          | sequences waiting to join; beyond: 429 + Retry-After  |
 * | `SERVE_MAX_MODELS`         | 4           | checkpoints kept loaded (least recently used dropped) |
 * | `SERVE_MAX_NAMED_MODELS`   | 8           | models loaded by name (`/v1/load_checkpoint`, `/v1/load_lora_adapter`) kept, over all tenants (least recently used evicted, loaded again on its next request) |
 * | `SERVE_MAX_REGISTERED_NAMES` | 256       | names one tenant may have registered, loaded or evicted (≥ `SERVE_MAX_NAMED_MODELS`); a load under a new name beyond it is a 400 |
 * | `SERVE_PREFIX_CACHE_MB`    | 256         | MiB of prompt KV kept for later prompts that begin with the same tokens, over all models (0 keeps none) |
 * | `SERVE_THREADS`            | 2           | onnxruntime intra-op threads                          |
 * | `SERVE_DEFAULT_MAX_TOKENS` | 256         | `max_tokens` of a request that gives none             |
 * | `SERVE_EXECUTION_PROVIDERS` | `cpu`      | onnxruntime providers to try at start, best first (e.g. `cuda,webgpu,cpu`), probed as a GPU worker's are (workers/engine/providers.ts) |
 * | `LOG_LEVEL`                | info        | the log's threshold: debug, info, warn or error (any case; jobs/logger.ts) |
 */
import { z } from "zod";
import {
  type ArtifactStore,
  createLogger,
  type Database,
  LogLevelSetting,
  openDatabase,
  openStore,
  readSettings,
  settingsErrorMessage,
  wholeNumberSetting,
} from "../../jobs/mod.ts";
import {
  chooseExecutionProvider,
  EXECUTION_PROVIDERS,
  type ExecutionProvider,
  SessionCache,
} from "../engine/mod.ts";
import { createServeApp } from "./app.ts";
import { DecodeEngine, type DecodeEngineOptions, PREFIX_CACHE_BYTES } from "./engine.ts";
import { ModelRegistry } from "./models.ts";
import {
  DEFAULT_MAX_NAMED_MODELS,
  DEFAULT_MAX_REGISTERED_NAMES,
  NamedModels,
} from "./lora_admin.ts";

/** A whole-number setting from `min` to `max` with its default (jobs/settings.ts). */
function wholeNumber(min: number, max: number, fallback: number, unit?: string) {
  return wholeNumberSetting(min, max, { unit }).default(fallback);
}

const PROVIDERS_RULE = `a comma-separated list of ${EXECUTION_PROVIDERS.join(", ")}`;

const EnvSchema = z.object({
  SERVE_HOST: z.string({ error: "a host name or address" }).min(1).default("127.0.0.1"),
  SERVE_PORT: wholeNumber(0, 65535, 8788),
  SERVE_MAX_BATCH: wholeNumber(1, 1024, 32),
  SERVE_MAX_QUEUE: wholeNumber(0, 100_000, 64),
  SERVE_MAX_MODELS: wholeNumber(1, 256, 4),
  SERVE_MAX_NAMED_MODELS: wholeNumber(1, 256, DEFAULT_MAX_NAMED_MODELS),
  SERVE_MAX_REGISTERED_NAMES: wholeNumber(1, 100_000, DEFAULT_MAX_REGISTERED_NAMES),
  SERVE_PREFIX_CACHE_MB: wholeNumber(0, 65_536, PREFIX_CACHE_BYTES / 2 ** 20, "MiB"),
  SERVE_THREADS: wholeNumber(1, 256, 2),
  SERVE_DEFAULT_MAX_TOKENS: wholeNumber(1, 1_000_000, 256),
  SERVE_EXECUTION_PROVIDERS: z.string().default("cpu")
    .transform((s) => s.split(",").map((p) => p.trim())).pipe(
      z.array(
        z.enum(EXECUTION_PROVIDERS as [ExecutionProvider, ...ExecutionProvider[]], {
          error: PROVIDERS_RULE,
        }),
      ).min(1, { error: PROVIDERS_RULE }),
    ),
  LOG_LEVEL: LogLevelSetting.default("info"),
}).superRefine((c, ctx) => {
  // below it, a server used by one tenant could never fill its loaded slots
  if (c.SERVE_MAX_REGISTERED_NAMES < c.SERVE_MAX_NAMED_MODELS) {
    ctx.addIssue({
      code: "custom",
      path: ["SERVE_MAX_REGISTERED_NAMES"],
      message: `a whole number from SERVE_MAX_NAMED_MODELS (${c.SERVE_MAX_NAMED_MODELS}) to 100000`,
    });
  }
});

/** Validated server settings (table in the module doc). */
export type ServeConfig = z.infer<typeof EnvSchema>;

/**
 * Reads the settings from the environment. An empty value (`SERVE_PREFIX_CACHE_MB=`) counts as
 * unset, so the variable takes its default, as the worker's variables do.
 * @throws z.ZodError with one issue per invalid variable: its path is the variable's name, its
 *   message the rule the value breaks ("a whole number of MiB from 0 to 65536"); see
 *   {@link serveConfigErrorMessage}.
 */
export function serveConfigFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): ServeConfig {
  return readSettings(EnvSchema, env);
}

/**
 * One line for a settings error of {@link serveConfigFromEnv}: "Cannot start the server as
 * SERVE_X must be <rule>: current value is "<value>"", then "; SERVE_Y must be …" for each other
 * invalid variable (each named once; jobs/settings.ts `settingsErrorMessage`, as the worker's).
 */
export function serveConfigErrorMessage(
  e: z.ZodError,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): string {
  return settingsErrorMessage("the server", e, env);
}

/** What {@link startServer} started. */
export interface RunningServer {
  /** Actual port. */
  port: number;
  engine: DecodeEngine;
  registry: ModelRegistry;
  /** Stops accepting requests, waits for those in flight, releases the sessions. */
  stop(): Promise<void>;
}

/** Options of {@link startServer}: the settings plus test hooks of the engine. */
export interface StartOptions extends Partial<ServeConfig> {
  db: Database;
  store: ArtifactStore;
  /** Key lookups cached this long (ms; default 2000). */
  authCacheMs?: number;
  engine?: Pick<DecodeEngineOptions, "beforeStep" | "onRelease" | "maxTokensPerCall">;
  /** The onnxruntime provider every session uses (default `cpu`; `main` probes the list). */
  executionProvider?: ExecutionProvider;
}

/** Serves the inference app over `db` and `store` (which the caller closes after `stop`). */
export function startServer(options: StartOptions): RunningServer {
  const c = { ...serveConfigFromEnv({}), ...options };
  const sessions = new SessionCache({ threads: c.SERVE_THREADS, ep: options.executionProvider });
  const engine = new DecodeEngine({
    maxBatch: c.SERVE_MAX_BATCH,
    maxQueue: c.SERVE_MAX_QUEUE,
    prefixCacheBytes: c.SERVE_PREFIX_CACHE_MB * 2 ** 20,
    ...options.engine,
  });
  const registry = new ModelRegistry({
    db: options.db,
    store: options.store,
    sessions,
    maxModels: c.SERVE_MAX_MODELS,
  });
  const named = new NamedModels({
    db: options.db,
    store: options.store,
    sessions,
    maxModels: c.SERVE_MAX_NAMED_MODELS,
    maxNames: c.SERVE_MAX_REGISTERED_NAMES,
  });
  const app = createServeApp({
    db: options.db,
    store: options.store,
    engine,
    registry,
    named,
    authCacheMs: options.authCacheMs,
    defaultMaxTokens: c.SERVE_DEFAULT_MAX_TOKENS,
  });
  const server = Deno.serve(
    { hostname: c.SERVE_HOST, port: c.SERVE_PORT, onListen: () => {} },
    app.fetch,
  );
  return {
    port: server.addr.port,
    engine,
    registry,
    async stop() {
      await server.shutdown();
      await engine.idle();
      await registry.close();
      await named.close();
      await sessions.release();
    },
  };
}

if (import.meta.main) {
  let config: ServeConfig;
  try {
    config = serveConfigFromEnv();
  } catch (e) {
    if (!(e instanceof z.ZodError)) throw e;
    // LOG_LEVEL may be the bad variable: this one line is an error, shown at every level.
    createLogger({ service: "serve" }, { level: "error" })
      .error("the server cannot start", { error: serveConfigErrorMessage(e) });
    Deno.exit(1);
  }
  const log = createLogger({ service: "serve" }, { level: config.LOG_LEVEL });
  const db = await openDatabase();
  const store = await openStore();
  const providers = config.SERVE_EXECUTION_PROVIDERS;
  const choice = providers.join() === "cpu"
    ? { provider: "cpu" as const, skipped: [] }
    : await chooseExecutionProvider(providers);
  const server = startServer({ ...config, db, store, executionProvider: choice.provider });
  log.info("serve listening", {
    executionProvider: choice.provider,
    skipped: choice.skipped,
    hostname: config.SERVE_HOST,
    port: server.port,
    maxBatch: config.SERVE_MAX_BATCH,
    maxQueue: config.SERVE_MAX_QUEUE,
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await server.stop();
    await store.close();
    await db.close();
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
}
