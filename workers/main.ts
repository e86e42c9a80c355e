/**
 * `deno task worker`: one worker process. Opens the database (`DATABASE_URL`, or embedded PGlite
 * in `SEED_DATA_DIR`) and the artifact store (`S3_*`, or the embedded server), then claims and
 * runs jobs until SIGTERM/SIGINT, which drains: the current step finishes, the handler
 * checkpoints, and the job is released to the queue. A second signal exits at once (the lease
 * then expires and the reaper requeues the job with attempt + 1).
 *
 * Run as the entry point, it registers the SEED trainer (`workers/seed/run/handler.ts`) for the
 * methods `seed`, `grpo` and `sft`. Imported (e.g. by a test's worker process), it registers
 * nothing: the importer registers its own handlers before calling {@link main}.
 */
import { openDatabase, openStore } from "../jobs/mod.ts";
import { registerSeedHandlers } from "./seed/run/handler.ts";
import { createLogger, errorFields, Worker, workerConfigFromEnv } from "./worker/mod.ts";

/** Runs a worker with the given handler registrations already made; resolves on exit. */
export async function main(): Promise<void> {
  const log = createLogger({ service: "worker" });
  const config = workerConfigFromEnv();
  const db = await openDatabase();
  const store = await openStore();
  const worker = new Worker({ db, store, ...config, logger: log });
  let signals = 0;
  const onSignal = () => {
    if (++signals > 1) {
      log.warn("second signal: exiting now");
      Deno.exit(130);
    }
    worker.drain();
  };
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  try {
    await worker.run();
  } catch (e) {
    log.error("worker crashed", errorFields(e));
    throw e;
  } finally {
    Deno.removeSignalListener("SIGTERM", onSignal);
    Deno.removeSignalListener("SIGINT", onSignal);
    await store.close();
    await db.close();
  }
}

if (import.meta.main) {
  registerSeedHandlers();
  await main();
}
