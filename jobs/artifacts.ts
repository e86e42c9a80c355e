/**
 * Checkpoints and skill libraries: objects in the store, rows in the database. The row is the
 * commit point (jobs/README.md, "Data flow of one job", step 4): objects are uploaded first, then
 * the row is inserted under the worker's fence. An object without a row is garbage and never
 * visible; a stale worker's row is refused ({@link FenceLostError}) so its uploads stay garbage,
 * and as objects are keyed by the writing attempt (jobs/keys.ts) those uploads cannot overwrite
 * what a newer attempt committed.
 */
import type { Queryable } from "./db.ts";
import { type Fence, FenceLostError } from "./errors.ts";
import { checkpointKey, checkpointPrefix, skillsKey } from "./keys.ts";
import type { Checkpoint, CheckpointFile, SkillLibrary } from "./schema.ts";
import type { ArtifactStore } from "./store.ts";
import { toCheckpoint, toDate, toSkillLibrary } from "./_rows.ts";

/**
 * The fenced predicate over `$1` job, `$2` attempt, `$3` worker (FOR SHARE: see events.ts).
 * Internal to jobs/ (also used by trajectories.ts); not re-exported by mod.ts.
 */
export const FENCED = `select id, attempt from jobs
  where id = $1::uuid and attempt = $2::int and worker_id = $3::text
    and status in ('running', 'cancelling')
  for share`;

const SQL = {
  /** commitCheckpoint: the checkpoint's row, under the fence; a rerun of a step replaces it. */
  commitCheckpoint: `insert into checkpoints (job_id, step, attempt, prefix, files, bytes)
    select id, $4::int, attempt, $5::text, $6::jsonb, $7::bigint from (${FENCED}) fenced
    on conflict (job_id, step) do update
      set attempt = excluded.attempt, prefix = excluded.prefix, files = excluded.files,
          bytes = excluded.bytes, created_at = now()
    returning *`,
  /** latestCheckpoint: the committed checkpoint with the highest step. */
  latestCheckpoint: `select * from checkpoints where job_id = $1::uuid order by step desc limit 1`,
  /** checkpointAt: the committed checkpoint of one step. */
  checkpointAt: `select * from checkpoints where job_id = $1::uuid and step = $2::int`,
  /**
   * tenantCheckpoints: the committed checkpoints of a tenant's jobs (steps and times only), newest
   * job first, at most $2 jobs; jobs being deleted are left out (jobs/delete.ts).
   */
  tenantCheckpoints: `select c.job_id, c.step, c.created_at from checkpoints c
    join (select id, created_at from jobs where tenant_id = $1::uuid and deleting_at is null
            and exists (select 1 from checkpoints k where k.job_id = jobs.id)
          order by created_at desc, id desc limit $2::int) j on j.id = c.job_id
    order by j.created_at desc, j.id desc, c.step`,
  /** listCheckpoints: all committed checkpoints by step. */
  listCheckpoints: `select * from checkpoints where job_id = $1::uuid order by step`,
  /** commitSkills: the skill library's row, under the fence. */
  commitSkills:
    `insert into skill_libraries (job_id, step, attempt, key, bytes, sha256, skill_count)
    select id, $4::int, attempt, $5::text, $6::bigint, $7::text, $8::int from (${FENCED}) fenced
    on conflict (job_id, step) do update
      set attempt = excluded.attempt, key = excluded.key, bytes = excluded.bytes,
          sha256 = excluded.sha256, skill_count = excluded.skill_count, created_at = now()
    returning *`,
  /** latestSkills: the skill library with the highest step. */
  latestSkills: `select * from skill_libraries where job_id = $1::uuid order by step desc limit 1`,
  /** skillsAt: the skill library of one step. */
  skillsAt: `select * from skill_libraries where job_id = $1::uuid and step = $2::int`,
  /** listSkills: all skill libraries by step. */
  listSkills: `select * from skill_libraries where job_id = $1::uuid order by step`,
} as const;

/**
 * A file to put in a checkpoint: its bytes, or the path of a file on disk (uploaded in parts,
 * never held whole: jobs/store.ts `putFile`). `name` is the file name, e.g. `model.safetensors`
 * (see `FILE_NAME_PATTERN` in keys.ts).
 */
export type CheckpointFileInput =
  | { name: string; bytes: Uint8Array }
  | { name: string; path: string };

/** Who writes: the fence plus the job's tenant (for the key layout). */
export interface Writer {
  fence: Fence;
  tenantId: string;
}

/** A checkpoint whose objects are uploaded and whose row is not yet committed. */
export interface UploadedCheckpoint {
  step: number;
  prefix: string;
  files: CheckpointFile[];
}

/**
 * Uploads the files of a checkpoint (keyed by the writer's attempt); commits nothing.
 * @throws InvalidKeyError for an unsafe file name; RangeError for duplicate names.
 */
export async function uploadCheckpoint(
  store: ArtifactStore,
  writer: Writer,
  checkpoint: { step: number; files: CheckpointFileInput[] },
): Promise<UploadedCheckpoint> {
  const { fence, tenantId } = writer;
  const { step, files } = checkpoint;
  const names = new Set(files.map((f) => f.name));
  if (names.size !== files.length) {
    throw new RangeError(`Cannot save checkpoint ${step} as its file names must be unique`);
  }
  const stored: CheckpointFile[] = [];
  for (const f of files) {
    const key = checkpointKey(tenantId, fence.jobId, step, f.name, { attempt: fence.attempt });
    const { bytes, sha256 } = "path" in f
      ? await store.putFile(key, f.path)
      : await store.put(key, f.bytes);
    stored.push({ name: f.name, key, bytes, sha256 });
  }
  const prefix = checkpointPrefix(tenantId, fence.jobId, step, { attempt: fence.attempt });
  return { step, prefix, files: stored };
}

/**
 * Commits an uploaded checkpoint's row under the fence (on `q`: the database or a transaction).
 * @throws FenceLostError when the fence no longer holds.
 */
export async function commitCheckpointRow(
  q: Queryable,
  fence: Fence,
  uploaded: UploadedCheckpoint,
): Promise<Checkpoint> {
  const total = uploaded.files.reduce((s, f) => s + f.bytes, 0);
  const rows = await q.query(SQL.commitCheckpoint, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    uploaded.step,
    uploaded.prefix,
    JSON.stringify(uploaded.files),
    total,
  ]);
  if (rows.length === 0) throw new FenceLostError(fence, `commit checkpoint ${uploaded.step}`);
  return toCheckpoint(rows[0]);
}

/**
 * Uploads the files of a checkpoint, then commits its row under the fence.
 * @throws FenceLostError when the fence no longer holds (the uploads are then garbage).
 * @throws InvalidKeyError for an unsafe or duplicate file name.
 */
export async function saveCheckpoint(
  db: Queryable,
  store: ArtifactStore,
  writer: Writer,
  checkpoint: { step: number; files: CheckpointFileInput[] },
): Promise<Checkpoint> {
  return await commitCheckpointRow(
    db,
    writer.fence,
    await uploadCheckpoint(store, writer, checkpoint),
  );
}

/** The committed checkpoint with the highest step, or null. */
export async function latestCheckpoint(db: Queryable, jobId: string): Promise<Checkpoint | null> {
  const rows = await db.query(SQL.latestCheckpoint, [jobId]);
  return rows.length ? toCheckpoint(rows[0]) : null;
}

/** The committed checkpoint of `step`, or null. */
export async function getCheckpoint(
  db: Queryable,
  jobId: string,
  step: number,
): Promise<Checkpoint | null> {
  const rows = await db.query(SQL.checkpointAt, [jobId, step]);
  return rows.length ? toCheckpoint(rows[0]) : null;
}

/** A job's committed checkpoints, by step. */
export async function listCheckpoints(db: Queryable, jobId: string): Promise<Checkpoint[]> {
  return (await db.query(SQL.listCheckpoints, [jobId])).map(toCheckpoint);
}

/** One committed checkpoint of a tenant's job, as listed by {@link listTenantCheckpoints}. */
export interface TenantCheckpoint {
  jobId: string;
  step: number;
  createdAt: Date;
}

/**
 * The committed checkpoints of the `limit` newest jobs of `tenantId` that have any, newest job
 * first and by step within a job (e.g. the models an inference server offers the tenant).
 */
export async function listTenantCheckpoints(
  db: Queryable,
  tenantId: string,
  limit = 100,
): Promise<TenantCheckpoint[]> {
  const rows = await db.query(SQL.tenantCheckpoints, [tenantId, limit]);
  return rows.map((r) => ({
    jobId: String(r.job_id),
    step: Number(r.step),
    createdAt: toDate(r.created_at)!,
  }));
}

/**
 * Reads one file of a committed checkpoint, verified against its recorded SHA-256.
 * @throws RangeError when the checkpoint has no such file; IntegrityError on a hash mismatch.
 */
export async function readCheckpointFile(
  store: ArtifactStore,
  checkpoint: Checkpoint,
  name: string,
): Promise<Uint8Array> {
  const file = checkpoint.files.find((f) => f.name === name);
  if (!file) {
    throw new RangeError(
      `Cannot read ${name} from checkpoint ${checkpoint.step} as it must be one of: ${
        checkpoint.files.map((f) => f.name).join(", ")
      }`,
    );
  }
  return await store.get(file.key, { sha256: file.sha256 });
}

/** A skill library whose object is uploaded and whose row is not yet committed. */
export interface UploadedSkills {
  step: number;
  key: string;
  bytes: number;
  sha256: string;
  skillCount: number;
}

/** Uploads a skill library's JSON (keyed by the writer's attempt); commits nothing. */
export async function uploadSkillLibrary(
  store: ArtifactStore,
  writer: Writer,
  library: { step: number; json: unknown; skillCount: number },
): Promise<UploadedSkills> {
  const { fence, tenantId } = writer;
  const key = skillsKey(tenantId, fence.jobId, library.step, { attempt: fence.attempt });
  const body = new TextEncoder().encode(JSON.stringify(library.json));
  const { bytes, sha256 } = await store.put(key, body, { contentType: "application/json" });
  return { step: library.step, key, bytes, sha256, skillCount: library.skillCount };
}

/**
 * Commits an uploaded skill library's row under the fence (on the database or a transaction).
 * @throws FenceLostError when the fence no longer holds.
 */
export async function commitSkillsRow(
  q: Queryable,
  fence: Fence,
  up: UploadedSkills,
): Promise<SkillLibrary> {
  const rows = await q.query(SQL.commitSkills, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    up.step,
    up.key,
    up.bytes,
    up.sha256,
    up.skillCount,
  ]);
  if (rows.length === 0) throw new FenceLostError(fence, `commit skills of step ${up.step}`);
  return toSkillLibrary(rows[0]);
}

/**
 * Uploads a skill library (JSON) and commits its row under the fence.
 * @param library.skillCount number of skills in it (shown in listings).
 * @throws FenceLostError when the fence no longer holds.
 */
export async function saveSkillLibrary(
  db: Queryable,
  store: ArtifactStore,
  writer: Writer,
  library: { step: number; json: unknown; skillCount: number },
): Promise<SkillLibrary> {
  return await commitSkillsRow(db, writer.fence, await uploadSkillLibrary(store, writer, library));
}

/** The skill library of `step`, or the latest when `step` is undefined; null when none. */
export async function getSkillLibrary(
  db: Queryable,
  jobId: string,
  step?: number,
): Promise<SkillLibrary | null> {
  const rows = step === undefined
    ? await db.query(SQL.latestSkills, [jobId])
    : await db.query(SQL.skillsAt, [jobId, step]);
  return rows.length ? toSkillLibrary(rows[0]) : null;
}

/** A job's skill libraries, by step. */
export async function listSkillLibraries(db: Queryable, jobId: string): Promise<SkillLibrary[]> {
  return (await db.query(SQL.listSkills, [jobId])).map(toSkillLibrary);
}

/** Reads a skill library's JSON, verified against its recorded SHA-256. */
export async function readSkillLibrary(
  store: ArtifactStore,
  library: SkillLibrary,
): Promise<unknown> {
  const bytes = await store.get(library.key, { sha256: library.sha256 });
  return JSON.parse(new TextDecoder().decode(bytes));
}
