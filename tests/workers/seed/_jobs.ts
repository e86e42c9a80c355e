/**
 * Running real trainer jobs through the real Worker on a test database and s3rver: a tiny spec
 * (builtin:tiny on sokoban, 2 tasks × 2 copies, 3 turns, a few tokens) and helpers to run a job
 * and read what it left.
 */
import {
  type ArtifactStore,
  type Database,
  type Job,
  type JobSpecInput,
  listCheckpoints,
  listEvents,
  listMetrics,
  parseJobSpec,
  readCheckpointFile,
  submitJob,
} from "../../../jobs/mod.ts";
import {
  createSeedHandler,
  registerSeedHandlers,
  type SeedHandlerOptions,
} from "../../../workers/seed/run/handler.ts";
import {
  createLogger,
  HandlerRegistry,
  type JobHandler,
  type RunResult,
  Worker,
} from "../../../workers/worker/mod.ts";

/** A spec small enough for a test (each job a few seconds). */
export function tinySpec(overrides: Record<string, unknown> = {}): JobSpecInput {
  return {
    env: { id: "sokoban", max_turns: 3, history: 0 },
    rollout: { tasks_per_step: 2, group_size: 2, max_new_tokens: 6 },
    seed: { analyzer_max_new_tokens: 24, analyzer_max_steps: 2, analyzer_max_field_chars: 64 },
    warmup: {
      policy: { episodes: 2, epochs: 1, batch_size: 8 },
      analyzer: { episodes: 2, epochs: 1, batch_size: 8 },
    },
    optim: { mini_batch_size: 8, lr: 1e-3 },
    steps: 2,
    eval_every: 1,
    checkpoint_every: 1,
    eval: { episodes: 2 },
    random_seed: 5,
    ...overrides,
  } as JobSpecInput;
}

/**
 * One onnxruntime thread. Runs are bit-identical for any fixed thread count
 * (reproducible_job_test.ts); bit-exact comparisons only need every part of both runs (a resumed
 * job's drained half included) on the same count, and these tests pick one.
 */
export const ONE_THREAD = { engine: { threads: 1 } };

/**
 * Handlers of the trainer: as the worker runs them (each job in a compute process), or, with
 * `wrap`, the wrapped handler in process (e.g. to drain after a step).
 */
export function trainerRegistry(
  wrap?: (h: JobHandler) => JobHandler,
  options: SeedHandlerOptions = {},
): HandlerRegistry {
  const registry = new HandlerRegistry();
  if (!wrap) {
    registerSeedHandlers(registry, options);
    return registry;
  }
  const handler = wrap(createSeedHandler(options));
  for (const m of ["seed", "grpo", "sft"]) registry.register(m, handler);
  return registry;
}

/** A worker on the test database and store (no reaper, quiet logs). */
export function testWorker(db: Database, store: ArtifactStore, registry: HandlerRegistry): Worker {
  return new Worker({
    db,
    store,
    registry,
    pollMs: 50,
    reaperIntervalMs: 0,
    logger: createLogger({}, { level: "error", sink: () => {} }),
  });
}

/** Submits a job of `spec` for `tenantId`. */
export async function submit(db: Database, tenantId: string, spec: JobSpecInput): Promise<Job> {
  return (await submitJob(db, { tenantId, spec: parseJobSpec(spec) })).job;
}

/** Claims and runs one job with `worker`; throws when none was claimed. */
export async function runOne(worker: Worker): Promise<RunResult> {
  const r = await worker.runOnce();
  if (!r) throw new Error("Cannot run a job as one must be queued: none was claimed");
  return r.result;
}

/** Metrics by step of a job. */
export async function metricsByStep(
  db: Database,
  jobId: string,
): Promise<Map<number, Record<string, number>>> {
  return new Map((await listMetrics(db, jobId)).map((r) => [r.step, r.values]));
}

/** Event types of a job, in order. */
export async function eventTypes(db: Database, jobId: string): Promise<string[]> {
  return (await listEvents(db, jobId, { limit: 1000 })).map((e) => e.type);
}

/** One file of a job's checkpoint. */
export async function checkpointFile(
  db: Database,
  store: ArtifactStore,
  jobId: string,
  step: number,
  name: string,
): Promise<Uint8Array> {
  const ck = (await listCheckpoints(db, jobId)).find((c) => c.step === step);
  if (!ck) throw new Error(`Cannot read checkpoint ${step} of ${jobId} as it must exist`);
  return await readCheckpointFile(store, ck, name);
}

/** The metrics that do not depend on timing (for exact comparisons). */
export function untimed(m: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(m).filter(([k]) => !/seconds|per_second/.test(k)),
  );
}
