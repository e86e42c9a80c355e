/**
 * Running real trainer jobs through the real Worker on a test database and s3rver: a tiny spec
 * (builtin:tiny on sokoban, 2 tasks × 2 copies, 3 turns, a few tokens), a harness that opens the
 * database, the store and a tenant for one test, and helpers to run a job and read what it left.
 * For tests of one trainer step without a job: the trainer a job would build (`testTrainer`) and a
 * policy whose analyses are fixed (`FixedAnalyzer`).
 */
import { createTenant, openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore, type TestStore } from "../../_harness/s3.ts";
import {
  type ArtifactStore,
  createLogger,
  type Database,
  getJob,
  type Job,
  type JobSpec,
  type JobSpecInput,
  listCheckpoints,
  listEvents,
  listMetrics,
  METHODS,
  parseJobSpec,
  readCheckpointFile,
  submitJob,
} from "../../../jobs/mod.ts";
import {
  type AsyncEnvironment,
  getEnvironment,
  toAsyncEnvironment,
} from "../../../workers/envs/mod.ts";
import {
  AdamW,
  type HfModel,
  parameterSpecs,
  Policy,
  Rng,
  type Tokenizer,
} from "../../../workers/model/mod.ts";
import {
  runPlan,
  SeedTrainer,
  type TextGenerateOptions,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
import { SkillLibrary } from "../../../workers/skills/mod.ts";
import { resolveModel } from "../../../workers/seed/run/mod.ts";
import {
  createSeedHandler,
  registerSeedHandlers,
  type SeedHandlerOptions,
} from "../../../workers/seed/run/handler.ts";
import {
  HandlerRegistry,
  type JobHandler,
  type RunResult,
  Worker,
  type WorkerOptions,
} from "../../../workers/worker/mod.ts";

/**
 * A spec small enough for a test (each job a few seconds). `overrides` replace top-level blocks,
 * except `seed`, whose fields merge into the base's. The analyzer's budget holds Sokoban's
 * shortest skill-only object under its skill grammar with the builtin tokenizer
 * (trainer_teacher_test.ts checks the bound).
 */
export function tinySpec(overrides: Record<string, unknown> = {}): JobSpecInput {
  const seed = {
    analyzer_max_new_tokens: 48,
    analyzer_max_steps: 2,
    analyzer_max_field_chars: 64,
    ...(overrides.seed as Record<string, unknown> | undefined),
  };
  return {
    env: { id: "sokoban", max_turns: 3, history: 0 },
    rollout: { tasks_per_step: 2, group_size: 2, max_new_tokens: 6 },
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
    seed,
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
  for (const m of METHODS) registry.register(m, handler);
  return registry;
}

/** Worker options of the tests: fast polling, no reaper, only error logs, and those dropped. */
const QUIET_WORKER = {
  pollMs: 50,
  reaperIntervalMs: 0,
  logger: createLogger({}, { level: "error", sink: () => {} }),
} as const satisfies Partial<WorkerOptions>;

/** A worker on the test database and store (no reaper, quiet logs). */
export function testWorker(db: Database, store: ArtifactStore, registry: HandlerRegistry): Worker {
  return new Worker({ db, store, registry, ...QUIET_WORKER });
}

/**
 * What one job test runs on: a fresh migrated test database with one tenant and an s3rver store.
 * `await using h = await openJobHarness()` stops both when the test ends, passed or failed.
 */
export interface JobHarness extends AsyncDisposable {
  readonly db: Database;
  readonly store: ArtifactStore;
  readonly tenantId: string;
  /** Submits a job of `spec` for the harness's tenant. */
  submit(spec: JobSpecInput): Promise<Job>;
  /**
   * A trainer worker (`trainerRegistry` with `options`: `{}` runs as deployed, `ONE_THREAD` on
   * one engine thread) with the test defaults of `testWorker`, then `overrides` over them.
   */
  worker(options: SeedHandlerOptions, overrides?: Partial<WorkerOptions>): Worker;
  /**
   * A trainer worker (`options` as `worker`) that drains itself once its job has committed
   * `step`: the job is released there, for another worker to resume.
   */
  drainingWorker(step: number, options: SeedHandlerOptions): Worker;
  /** The error a job ended with, "" when none (for assertion messages). */
  error(jobId: string): Promise<string>;
  /** One file of a job's checkpoint at `step`; throws when there is no such checkpoint. */
  file(jobId: string, step: number, name: string): Promise<Uint8Array>;
  /** Stops the store and closes and drops the database (what disposing does). */
  close(): Promise<void>;
}

/** Opens a `JobHarness` (a few seconds: the database is migrated). */
export async function openJobHarness(): Promise<JobHarness> {
  const database = await openTestDatabase();
  const { db } = database;
  let s3: TestStore | undefined;
  const close = async () => {
    await s3?.close();
    await database.close();
  };
  let tenantId: string;
  try {
    s3 = await startTestStore();
    tenantId = await createTenant(db);
  } catch (e) {
    await close();
    throw e;
  }
  const { store } = s3;
  const worker = (options: SeedHandlerOptions, overrides: Partial<WorkerOptions> = {}) =>
    new Worker({
      db,
      store,
      registry: trainerRegistry(undefined, options),
      ...QUIET_WORKER,
      ...overrides,
    });
  return {
    db,
    store,
    tenantId,
    submit: (spec) => submit(db, tenantId, spec),
    worker,
    drainingWorker(step, options) {
      const holder: { worker?: Worker } = {};
      const registry = trainerRegistry((handler) => (ctx) =>
        handler({
          ...ctx,
          get draining() {
            return ctx.draining;
          },
          commitStep: async (committed, commit) => {
            await ctx.commitStep(committed, commit);
            if (committed === step) holder.worker!.drain(); // committed with its checkpoint
          },
        }), options);
      holder.worker = new Worker({ db, store, registry, ...QUIET_WORKER });
      return holder.worker;
    },
    error: async (jobId) => (await getJob(db, { tenantId, jobId }))?.error ?? "",
    file: (jobId, step, name) => checkpointFile(db, store, jobId, step, name),
    close,
    [Symbol.asyncDispose]: close,
  };
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

/**
 * The real policy, except that analyzer prompts get one fixed JSON answer naming `skill` (a
 * from-scratch tiny model cannot write one in a test's budget); every other prompt is generated.
 * `analyzerPrompts` keeps the analyzer prompts it answered.
 */
export class FixedAnalyzer extends TextPolicy {
  readonly analyzerPrompts: string[] = [];

  constructor(policy: Policy, tokenizer: Tokenizer, readonly skill = "push the box up") {
    super(policy, tokenizer);
  }

  override generate(prompts: string[], options: TextGenerateOptions) {
    if (!prompts[0]?.startsWith("Analyze the agent episode")) {
      return super.generate(prompts, options);
    }
    this.analyzerPrompts.push(...prompts);
    const json = JSON.stringify({ episode_summary: "moved", episode_skill: this.skill });
    const responseIds = prompts.map(() => []);
    return Promise.resolve({ texts: prompts.map(() => json), responseIds, tokens: 0 });
  }
}

/**
 * A `SeedTrainer` for `spec` as a job builds one, without the job: θ and the environment given,
 * no reference policy, AdamW with default `lr` (1e-3) over θ's base parameters, `Rng(1)`, and
 * `library` (default an empty one of job `job-1`). The trainer steps AdamW at the spec's
 * learning rate (`optim.lr` and its schedule), so `lr` does not keep θ fixed: a test that needs
 * the same θ twice builds two policies.
 */
export function testTrainer(
  spec: JobSpec,
  parts: { env: AsyncEnvironment; theta: TextPolicy; library?: SkillLibrary; lr?: number },
): SeedTrainer {
  return new SeedTrainer({
    spec,
    plan: runPlan(spec),
    env: parts.env,
    theta: parts.theta,
    reference: null,
    optimizer: new AdamW(parameterSpecs(parts.theta.policy.config), { lr: parts.lr ?? 1e-3 }),
    rng: new Rng(1),
    library: parts.library ?? new SkillLibrary("job-1"),
  });
}

/**
 * builtin:tiny as resolved for sokoban (init seed 1) and a policy of it on one engine thread; the
 * caller releases `policy`.
 */
export async function tinySokobanPolicy(): Promise<
  { env: AsyncEnvironment; model: HfModel; policy: Policy }
> {
  const env = toAsyncEnvironment(getEnvironment("sokoban"));
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  return { env, model, policy: new Policy(model.config, model.parameters, { threads: 1 }) };
}
