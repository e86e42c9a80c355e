/**
 * One commit per training step: a step's checkpoint, skill library, trajectory dumps, metrics
 * and the events that announce them become visible together or not at all. Every object is
 * uploaded first (attempt-scoped keys, invisible until a row names them); then one transaction,
 * holding the job row under the worker's fence (`FOR SHARE`, so a reap, cancel acknowledgement
 * or claim of the job waits for it), inserts every row. A worker killed anywhere before the
 * commit leaves only unreferenced objects; one killed after it left the whole step.
 *
 * Retrying a commit whose answer was lost is safe: rows are upserts keyed by `(job, step[, kind])`
 * and events carry idempotency keys chosen once per commit.
 */
import { type CheckpointFileInput, commitCheckpointRow, commitSkillsRow } from "./artifacts.ts";
import { uploadCheckpoint, uploadSkillLibrary, type Writer } from "./artifacts.ts";
import type { Database, Queryable } from "./db.ts";
import { FenceLostError } from "./errors.ts";
import { appendEvent, checkEvent } from "./events.ts";
import { checkMetrics, recordMetrics } from "./metrics.ts";
import type { ArtifactStore } from "./store.ts";
import {
  commitDumpRow,
  type TrajectoryDumpInput,
  type UploadedDump,
  uploadTrajectoryDump,
} from "./trajectories.ts";

/** An event committed with a step. */
export interface StepEvent {
  type: string;
  data?: Record<string, unknown>;
  /** Idempotency key (1–128 characters, unique per job), chosen once per commit. */
  key: string;
}

/** Everything a step produced (each part optional). */
export interface StepCommitInput {
  /** The step's metrics (finite numbers), also set as the job's latest metrics. */
  metrics?: Record<string, number>;
  /** Checkpoint files (see saveCheckpoint). */
  checkpoint?: CheckpointFileInput[];
  /** The skill library JSON and its size. */
  skills?: { json: unknown; skillCount: number };
  /** Trajectory dumps of the step (their `step` must equal the commit's). */
  trajectories?: TrajectoryDumpInput[];
  /** Events announcing the step (`step`, `eval`, `checkpoint` …), appended in this order. */
  events?: StepEvent[];
}

/** What is committed for one step of a job (see {@link stepRecord}). */
export interface StepRecord {
  metrics: boolean;
  checkpoint: boolean;
  skills: boolean;
  /** Kinds of the step's committed trajectory dumps, sorted. */
  trajectories: string[];
  /** Types of the job's events whose `data.step` is this step, sorted, each once. */
  events: string[];
}

const SQL = {
  /** holdFence: the job row under the fence, held (FOR SHARE) until the step's commit ends. */
  holdFence: `select id from jobs
    where id = $1::uuid and attempt = $2::int and worker_id = $3::text
      and status in ('running', 'cancelling')
    for share`,
  /** stepRecord: which of a step's artifacts are committed. */
  stepRecord: `select
      exists(select 1 from job_metrics where job_id = $1::uuid and step = $2::int) as metrics,
      exists(select 1 from checkpoints where job_id = $1::uuid and step = $2::int) as checkpoint,
      exists(select 1 from skill_libraries where job_id = $1::uuid and step = $2::int) as skills,
      coalesce((select array_agg(kind order by kind) from trajectory_dumps
                where job_id = $1::uuid and step = $2::int), '{}') as trajectories,
      coalesce((select array_agg(distinct type order by type) from job_events
                where job_id = $1::uuid and data->>'step' = $2::text), '{}') as events`,
} as const;

/**
 * Commits one step's artifacts together (see module doc).
 * @throws FenceLostError when the fence no longer holds (nothing of the step is visible).
 * @throws InvalidMetricsError, InvalidEventError, TrajectoryDumpError, RangeError on bad input,
 *   before anything is uploaded.
 */
export async function commitStep(
  db: Database,
  store: ArtifactStore,
  writer: Writer,
  step: number,
  input: StepCommitInput,
): Promise<void> {
  const { fence } = writer;
  if (input.metrics) checkMetrics(step, input.metrics);
  for (const e of input.events ?? []) checkEvent(e.type, e.data ?? {}, e.key);
  for (const d of input.trajectories ?? []) {
    if (d.step !== step) {
      throw new RangeError(
        `Cannot commit step ${step} as its trajectory dumps must be of that step: one is of step ${d.step}`,
      );
    }
  }
  const checkpoint = input.checkpoint
    ? await uploadCheckpoint(store, writer, { step, files: input.checkpoint })
    : undefined;
  const skills = input.skills
    ? await uploadSkillLibrary(store, writer, { step, ...input.skills })
    : undefined;
  const dumps: UploadedDump[] = [];
  for (const d of input.trajectories ?? []) {
    dumps.push(await uploadTrajectoryDump(store, writer, d));
  }
  await db.transaction(async (tx: Queryable) => {
    const held = await tx.query(SQL.holdFence, [fence.jobId, fence.attempt, fence.workerId]);
    if (held.length === 0) throw new FenceLostError(fence, `commit step ${step}`);
    for (const d of dumps) await commitDumpRow(tx, fence, d);
    if (input.metrics) await recordMetrics(tx, fence, step, input.metrics);
    if (checkpoint) await commitCheckpointRow(tx, fence, checkpoint);
    if (skills) await commitSkillsRow(tx, fence, skills);
    for (const e of input.events ?? []) {
      await appendEvent(tx, fence, e.type, e.data ?? {}, { key: e.key });
    }
  });
}

/** Which of a step's artifacts are committed (a resumed run repairs what its last step lacks). */
export async function stepRecord(db: Queryable, jobId: string, step: number): Promise<StepRecord> {
  const [r] = await db.query<Record<string, unknown>>(SQL.stepRecord, [jobId, step]);
  const list = (v: unknown) => (Array.isArray(v) ? v.map(String) : []);
  return {
    metrics: r.metrics === true,
    checkpoint: r.checkpoint === true,
    skills: r.skills === true,
    trajectories: list(r.trajectories),
    events: list(r.events),
  };
}
