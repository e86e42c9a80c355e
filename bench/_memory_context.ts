/**
 * An in-process JobContext for benchmarks and preset tuning: checkpoints, skills, metrics and
 * events kept in memory (no database or object store), so the trainer's own cost is measured.
 * Checkpoints can be shared between runs (`shared`) so a job can start from another's
 * (`job:<id>@step`).
 */
import { type JobSpecInput, parseJobSpec } from "../jobs/spec.ts";
import { createLogger, type Job } from "../jobs/mod.ts";
import type { JobContext, ResumePoint } from "../workers/worker/handler.ts";

/** Checkpoints by job id → step → files. */
export type CheckpointShelf = Map<string, Map<number, Map<string, Uint8Array>>>;

/** A finished in-memory run's records. */
export interface MemoryRun {
  ctx: JobContext;
  metrics: Map<number, Record<string, number>>;
  events: { type: string; data: Record<string, unknown> }[];
  /** The skill library JSON committed at each step that wrote one. */
  skills: Map<number, unknown>;
}

const point = (step: number, files: Map<string, Uint8Array>): ResumePoint => ({
  step,
  files: [...files].map(([name, b]) => ({ name, key: name, bytes: b.length, sha256: "" })),
  read: (name) => Promise.resolve(files.get(name)!),
});

/** A context for `spec` (see module doc); `onEvent` sees every event as it happens. */
export function memoryContext(
  input: JobSpecInput,
  options: {
    jobId?: string;
    shelf?: CheckpointShelf;
    /** Objects `readObject` serves, by `bucket/key` (e.g. a model folder for an `s3://` base). */
    objects?: ReadonlyMap<string, Uint8Array>;
    onEvent?: (type: string, data: Record<string, unknown>) => void;
    /**
     * Keep only each checkpoint file's name, not its bytes (a worker uploads them and lets go):
     * the run's peak memory is then the worker's, but it cannot be resumed or continued from.
     */
    discardCheckpoints?: boolean;
  } = {},
): MemoryRun {
  const jobId = options.jobId ?? crypto.randomUUID();
  const shelf = options.shelf ?? new Map();
  const mine = new Map<number, Map<string, Uint8Array>>();
  shelf.set(jobId, mine);
  const spec = parseJobSpec(input);
  const metrics = new Map<number, Record<string, number>>();
  const events: MemoryRun["events"] = [];
  const skills: MemoryRun["skills"] = new Map();
  const ctx: JobContext = {
    jobId,
    tenantId: "bench",
    attempt: 0,
    workerId: "bench",
    spec,
    job: { id: jobId, method: spec.method } as unknown as Job,
    signal: new AbortController().signal,
    draining: false,
    log: createLogger({ jobId }, { level: "error" }),
    emit(type, data = {}) {
      events.push({ type, data });
      options.onEvent?.(type, data);
      return Promise.resolve();
    },
    recordMetrics(step, values) {
      metrics.set(step, values);
      return Promise.resolve();
    },
    setProgress: () => Promise.resolve(),
    saveCheckpoint(step, files) {
      const keep = (b: Uint8Array) => options.discardCheckpoints ? new Uint8Array(0) : b;
      mine.set(step, new Map(files.map((f) => [f.name, keep(f.bytes)])));
      return Promise.resolve({} as never);
    },
    latestCheckpoint() {
      const steps = [...mine.keys()].sort((a, b) => b - a);
      return Promise.resolve(steps.length ? point(steps[0], mine.get(steps[0])!) : null);
    },
    checkpointAt(step) {
      const files = mine.get(step);
      return Promise.resolve(files ? point(step, files) : null);
    },
    artifacts: {
      checkpoint(id, step) {
        const job = shelf.get(id);
        if (!job) return Promise.resolve(null);
        const s = step ?? Math.max(...job.keys());
        const files = job.get(s);
        return Promise.resolve(files ? point(s, files) : null);
      },
      readObject: (bucket, key) =>
        Promise.resolve(options.objects?.get(`${bucket}/${key}`) ?? null),
    },
    saveSkills: () => Promise.resolve({} as never),
    async commitStep(step, commit) {
      if (commit.metrics) await ctx.recordMetrics(step, commit.metrics);
      if (commit.skills) skills.set(step, commit.skills.json);
      if (commit.checkpoint) await ctx.saveCheckpoint(step, commit.checkpoint);
      for (const e of commit.events ?? []) await ctx.emit(e.type, e.data);
    },
    stepRecord: (step) =>
      Promise.resolve({
        metrics: metrics.has(step),
        checkpoint: mine.has(step),
        skills: false,
        trajectories: [],
        events: [],
      }),
  };
  return { ctx, metrics, events, skills };
}
