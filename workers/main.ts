/**
 * `deno task worker`: one worker process. Opens the database (`DATABASE_URL`, or embedded PGlite
 * in `SEED_DATA_DIR`) and the artifact store (`S3_*`, or the embedded server), then claims and
 * runs jobs until SIGTERM/SIGINT, which drains: the current step finishes, the handler
 * checkpoints, and the job is released to the queue. A second signal, one that arrives more than
 * `SAME_PRESS_MS` (jobs/stop_signals.ts) after the first, exits at once (the lease then expires
 * and the reaper requeues the job with attempt + 1). Signals within that window are the same press
 * delivered twice: Ctrl-C signals the whole process group, and a wrapper in it
 * (`npx deno task worker`, `deno task`) forwards the signal to the worker once more.
 *
 * Run as the entry point, it registers the SEED trainer (`workers/seed/run/handler.ts`) for the
 * methods `seed`, `grpo` and `sft`, with the teacher pass's prefix KV budget from
 * `WORKER_PREFIX_CACHE_MB` (workers/worker/config.ts). Imported (e.g. by a test's worker process),
 * it registers nothing: the importer registers its own handlers before calling {@link main}.
 *
 * A worker whose providers (`WORKER_EXECUTION_PROVIDERS`, default cuda, webgpu, cpu for
 * `WORKER_DEVICE=gpu`) are more than `cpu` probes them once, before it opens anything, and runs
 * every job on the first that loads (workers/engine/README.md, "GPU workers"); when none loads it
 * exits with the reason of each.
 *
 * With `SEED_EXIT_WITH_PARENT=1` (set by `deno task demo` for its worker) the end of stdin, a pipe
 * from the parent, drains it as the first signal does: it ends with its parent, even a parent
 * killed with SIGKILL (jobs/exit_with_parent.ts).
 */
import { z } from "zod";
import {
  type ArtifactStore,
  createLogger,
  type Database,
  errorFields,
  exitWithParentFromEnv,
  isTransient,
  type Logger,
  onStopSignals,
  openDatabase,
  openStore,
} from "../jobs/mod.ts";
import { chooseExecutionProvider, type ProviderChoice } from "./engine/mod.ts";
import { registerSeedHandlers } from "./seed/run/handler.ts";
import {
  readableError,
  untilReachable,
  Worker,
  type WorkerConfig,
  workerConfigErrorMessage,
  workerConfigFromEnv,
} from "./worker/mod.ts";

/** Options of {@link main}. */
export interface MainOptions {
  /**
   * Registers the handlers that take settings from the worker's configuration; called once the
   * environment is validated, before anything is opened.
   */
  register?: (config: WorkerConfig) => void;
}

/** How long a stopping worker gives its connections to close before it exits anyway, in ms. */
export const EXIT_DEADLINE_MS = 10_000;

/**
 * Runs a worker with the given handler registrations already made (plus those `options.register`
 * makes from the validated configuration), then exits the process: 0 after a drain, 1 when it
 * cannot start (one log line saying why: an invalid variable such as `WORKER_PREFIX_CACHE_MB=1.5`
 * or `LOG_LEVEL=debg`, `Cannot start the worker as LOG_LEVEL must be one of debug, info, warn,
 * error: current value is "debg"`) or crashed.
 *
 * A database or store that cannot be reached at start is waited for (tries 50 ms … 1 s apart,
 * `untilReachable`), never a reason to exit; a stop signal meanwhile exits at once. After the
 * worker stops, the store and the database are closed within {@link EXIT_DEADLINE_MS} and the
 * process exits even if a connection is still open (a connection the driver reopened during an
 * outage must not keep a drained worker alive).
 */
export async function main(options: MainOptions = {}): Promise<never> {
  let config: WorkerConfig, executionProvider: ProviderChoice | undefined;
  try {
    config = workerConfigFromEnv();
  } catch (e) {
    // LOG_LEVEL may be the bad variable: this one line is an error, shown at every level.
    exitAfterStart(createLogger({ service: "worker" }, { level: "error" }), e);
  }
  const log = createLogger({ service: "worker" }, { level: config.logLevel });
  let exitWithParent = false;
  try {
    options.register?.(config);
    exitWithParent = exitWithParentFromEnv();
    executionProvider = await chooseProvider(config.executionProviders, config.device, log);
  } catch (e) {
    exitAfterStart(log, e);
  }
  ignoreIdleConnectionErrors(log);
  const starting = new AbortController();
  // Set once the database and store are open; a signal before that ends the wait instead.
  const started: { worker?: Worker } = {};
  const removeSignals = onStopSignals(
    {
      first: () => started.worker ? started.worker.drain() : starting.abort(),
      again: () => {
        log.warn("second signal: exiting now");
        Deno.exit(130);
      },
    },
    undefined,
    { exitWithParent },
  );
  const waitFor = (what: string) => (error: unknown, attempt: number, delayMs: number) => {
    // The first failure and then one line about every 30 s (tries are at most 1 s apart).
    if (attempt === 1 || attempt % 30 === 0) {
      log.warn(`${what} is unreachable; waiting for it`, {
        ...errorFields(error),
        attempt,
        delayMs,
      });
    }
  };
  let db: Database | undefined, store: ArtifactStore | undefined;
  try {
    db = await untilReachable(() => openDatabase(), {
      signal: starting.signal,
      onWait: waitFor("the database"),
    });
    store = await untilReachable(() => openStore(), {
      signal: starting.signal,
      onWait: waitFor("the artifact store"),
    });
  } catch (e) {
    if (!starting.signal.aborted) exitAfterStart(log, e);
    log.info("stopped before the database and the store were reachable");
    await closeWithin(EXIT_DEADLINE_MS, [store?.close(), db?.close()], log);
    Deno.exit(0);
  }
  const worker = new Worker({ db, store, ...config, executionProvider, logger: log });
  started.worker = worker;
  if (starting.signal.aborted) worker.drain();
  let code = 0;
  try {
    await worker.run();
  } catch (e) {
    log.error("worker crashed", errorFields(e));
    code = 1;
  } finally {
    removeSignals();
  }
  await closeWithin(EXIT_DEADLINE_MS, [store.close(), db.close()], log);
  Deno.exit(code);
}

/**
 * Logs why the worker cannot start, in one line without a stack trace (a bad variable, in the
 * shape of jobs/settings.ts; no usable provider; a migration that fails), and exits 1.
 */
function exitAfterStart(log: Logger, e: unknown): never {
  const message = e instanceof z.ZodError ? workerConfigErrorMessage(e) : readableError(e);
  log.error("the worker cannot start", { error: message });
  Deno.exit(1);
}

/**
 * Waits for `closing` to settle, at most `ms`; logs (and gives up on) a close that fails or does
 * not finish in time.
 */
async function closeWithin(
  ms: number,
  closing: (Promise<void> | undefined)[],
  log: Logger,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), ms));
  const settled = Promise.allSettled(closing).then((results) => {
    for (const r of results) {
      if (r.status === "rejected") log.warn("closing a connection failed", errorFields(r.reason));
    }
  });
  if (await Promise.race([settled, deadline]) === "late") {
    log.warn("connections did not close in time; exiting anyway", { deadlineMs: ms });
  }
  clearTimeout(timer);
}

/**
 * An idle pooled connection that the database or store resets (a restart, an outage) surfaces as
 * a rejection nobody awaits (e.g. `ConnectionReset` from the driver's socket). It is logged, not
 * fatal: the driver opens a new connection for the next statement, and every statement that
 * failed is retried by its caller. Any other unhandled rejection still ends the process.
 */
function ignoreIdleConnectionErrors(log: Logger): void {
  globalThis.addEventListener("unhandledrejection", (event) => {
    if (!isTransient(event.reason)) return;
    event.preventDefault();
    log.warn("a connection failed while idle; it will be reopened", errorFields(event.reason));
  });
}

/**
 * Probes `providers` (best first) unless the list is just cpu, logs the choice, and warns when a
 * gpu worker falls back to its CPU. @throws NoExecutionProviderError when none loads.
 */
async function chooseProvider(
  providers: WorkerConfig["executionProviders"],
  device: WorkerConfig["device"],
  log: Logger,
): Promise<ProviderChoice | undefined> {
  if (providers.length === 1 && providers[0] === "cpu") return undefined;
  log.info("probing execution providers", { device, providers });
  const choice = await chooseExecutionProvider(providers);
  const fields = { device, executionProvider: choice.provider, skipped: choice.skipped };
  if (device === "gpu" && choice.provider === "cpu") {
    log.warn("no GPU execution provider loaded: gpu jobs will run on the CPU", fields);
  } else log.info("execution provider chosen", fields);
  return choice;
}

if (import.meta.main) {
  await main({
    register: (config) =>
      registerSeedHandlers(
        undefined,
        config.prefixCacheBytes === undefined ? {} : { prefixCacheBytes: config.prefixCacheBytes },
      ),
  });
}
