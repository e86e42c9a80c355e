/**
 * `deno task worker`: one worker process. Opens the database (`DATABASE_URL`, or embedded PGlite
 * in `SEED_DATA_DIR`) and the artifact store (`S3_*`, or the embedded server), then claims and
 * runs jobs until SIGTERM/SIGINT, which drains: the current step finishes, the handler
 * checkpoints, and the job is released to the queue. A second signal, one that arrives more than
 * `SAME_PRESS_MS` (jobs/stop_signals.ts) after the first, exits at once (the lease then expires
 * and the reaper requeues the job with attempt + 1). Signals within that window are the same press delivered
 * twice: Ctrl-C signals the whole process group, and a wrapper in it (`npx deno task worker`,
 * `deno task`) forwards the signal to the worker once more.
 *
 * Run as the entry point, it registers the SEED trainer (`workers/seed/run/handler.ts`) for the
 * methods `seed`, `grpo` and `sft`. Imported (e.g. by a test's worker process), it registers
 * nothing: the importer registers its own handlers before calling {@link main}.
 *
 * A worker whose providers (`WORKER_EXECUTION_PROVIDERS`, default cuda, webgpu, cpu for
 * `WORKER_DEVICE=gpu`) are more than `cpu` probes them once, before it opens anything, and runs
 * every job on the first that loads (workers/engine/README.md, "GPU workers"); when none loads it exits with the
 * reason of each.
 */
import { z } from "zod";
import { onStopSignals, openDatabase, openStore } from "../jobs/mod.ts";
import { chooseExecutionProvider, type ProviderChoice } from "./engine/mod.ts";
import { registerSeedHandlers } from "./seed/run/handler.ts";
import {
  createLogger,
  errorFields,
  type Logger,
  readableError,
  Worker,
  type WorkerConfig,
  workerConfigFromEnv,
} from "./worker/mod.ts";

/** Runs a worker with the given handler registrations already made; resolves on exit. */
export async function main(): Promise<void> {
  const log = createLogger({ service: "worker" });
  let config: WorkerConfig, executionProvider: ProviderChoice | undefined;
  try {
    config = workerConfigFromEnv();
    executionProvider = await chooseProvider(config.executionProviders, config.device, log);
  } catch (e) {
    // A bad variable or no usable provider: say why on one line and exit, no stack trace.
    const message = e instanceof z.ZodError
      ? `Cannot start the worker as its environment must be valid: ${z.prettifyError(e)}`
      : readableError(e);
    log.error("the worker cannot start", { error: message });
    Deno.exit(1);
  }
  const db = await openDatabase();
  const store = await openStore();
  const worker = new Worker({ db, store, ...config, executionProvider, logger: log });
  const removeSignals = onStopSignals({
    first: () => worker.drain(),
    again: () => {
      log.warn("second signal: exiting now");
      Deno.exit(130);
    },
  });
  try {
    await worker.run();
  } catch (e) {
    log.error("worker crashed", errorFields(e));
    throw e;
  } finally {
    removeSignals();
    await store.close();
    await db.close();
  }
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
  registerSeedHandlers();
  await main();
}
