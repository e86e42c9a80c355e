/**
 * Builds the {@link JobContext} of one run: every write goes through the job domain's fenced
 * functions, retried on transient failures, and a {@link FenceLostError} from any of them tells
 * the run to stop (the same as one from a heartbeat).
 */
import {
  appendEvent,
  type ArtifactStore,
  type Checkpoint,
  type CheckpointFile,
  commitStep,
  type Database,
  type Fence,
  FenceLostError,
  getCheckpoint,
  getJob,
  getModel,
  type Job,
  jobPrefix,
  type JobProgress,
  type JobSpec,
  latestCheckpoint,
  type Logger,
  readCheckpointFile,
  readSecretValue,
  recordMetrics,
  saveCheckpoint,
  saveSkillLibrary,
  saveTrajectoryDump,
  type SecretCipher,
  secretCipherFromEnv,
  setProgress,
  stepRecord,
} from "../../jobs/mod.ts";
import {
  ArtifactAccessError,
  type ArtifactReader,
  type JobContext,
  type ResumePoint,
} from "./handler.ts";
import type { ExecutionProvider } from "../engine/mod.ts";
import { StepEta } from "./eta.ts";
import { withRetry } from "./retry.ts";

/** What a run's context is built from. */
export interface RunState {
  db: Database;
  store: ArtifactStore;
  job: Job;
  spec: JobSpec;
  fence: Fence;
  /** Aborted on cancel or lost fence. */
  signal: AbortSignal;
  /** Live view of the worker's draining flag. */
  isDraining: () => boolean;
  /** Called when a write finds the fence lost. */
  onFenceLost: (error: FenceLostError) => void;
  log: Logger;
  /** How long transient failures are retried, in ms (default 60 000). */
  retryForMs?: number;
  /** Decrypts tenant secrets (default `secretCipherFromEnv()`, made on first use). */
  secretCipher?: SecretCipher;
  /** The worker's execution provider (see {@link JobContext.executionProvider}). */
  executionProvider?: ExecutionProvider;
}

/** Creates the handler's context for one run (see {@link JobContext}). */
/** The key prefix of a job's published rollout policies (`publishRolloutPolicy`). */
function rolloutPolicyPrefix(tenantId: string, jobId: string): string {
  return `${jobPrefix(tenantId, jobId)}rollout-policy/`;
}

/**
 * Deletes the rollout-policy folders attempt `attempt` of `job` published (`publishRolloutPolicy`):
 * the worker calls it when the attempt ends, whatever the outcome (the endpoints loaded them
 * already; a later attempt publishes its own). Folders of other attempts are left to their own
 * worker or, when it died, to the sweeper (jobs/sweeper.ts). Returns how many objects it deleted.
 */
export async function removeRolloutPolicy(
  store: ArtifactStore,
  job: { tenantId: string; id: string },
  attempt: number,
): Promise<number> {
  const keys = await store.list(rolloutPolicyPrefix(job.tenantId, job.id));
  const mine = keys.filter((k) => k.includes(`/attempt-${attempt}/`));
  for (const k of mine) await store.delete(k);
  return mine.length;
}

export function createJobContext(state: RunState): JobContext {
  const { db, store, job, fence, log } = state;
  const writer = { fence, tenantId: job.tenantId };
  const recorded = new Set<number>();
  let stage: string | undefined;
  const eta = new StepEta();
  const withEta = (p: JobProgress): JobProgress => {
    if (p.etaS !== undefined || p.step === undefined || p.totalSteps === undefined) return p;
    const etaS = eta.observe(p.step, p.totalSteps, Date.now());
    return etaS === undefined ? p : { ...p, etaS };
  };

  // After a cancel or a lost fence nothing more is written: the run's remaining work is void.
  const fenced = async <T>(fn: () => Promise<T>): Promise<T> => {
    state.signal.throwIfAborted();
    try {
      return await withRetry(fn, {
        retryForMs: state.retryForMs,
        signal: state.signal,
        onRetry: (e, n, ms) =>
          log.warn("write failed; retrying", { retry: n, delayMs: ms, e: String(e) }),
      });
    } catch (e) {
      if (e instanceof FenceLostError) state.onFenceLost(e);
      throw e;
    }
  };

  const retried = <T>(fn: () => Promise<T>) => withRetry(fn, { signal: state.signal });
  /** Downloads the file `name` of `files` to `path`, verified against its SHA-256. */
  const fileReader =
    (files: CheckpointFile[], what: string) => async (name: string, path: string) => {
      const f = files.find((x) => x.name === name);
      if (!f) {
        throw new RangeError(
          `Cannot read ${name} from ${what} as it must be one of: ${
            files.map((x) => x.name).join(", ")
          }`,
        );
      }
      await retried(() => store.getToFile(f.key, path, { sha256: f.sha256 }));
    };
  const resumePoint = (ck: Checkpoint | null): ResumePoint | null =>
    ck && {
      step: ck.step,
      files: ck.files,
      read: (name) =>
        withRetry(() => readCheckpointFile(store, ck, name), { signal: state.signal }),
      readToFile: fileReader(ck.files, `checkpoint ${ck.step}`),
    };
  const artifacts: ArtifactReader = {
    async checkpoint(jobId, step) {
      if (!/^[0-9a-f-]{36}$/.test(jobId)) return null;
      const owned = await retried(() => getJob(db, { tenantId: job.tenantId, jobId }));
      if (!owned) return null;
      return resumePoint(
        await retried(() =>
          step === undefined ? latestCheckpoint(db, jobId) : getCheckpoint(db, jobId, step)
        ),
      );
    },
    async model(modelId) {
      const m = await retried(() => getModel(db, job.tenantId, modelId));
      return m && {
        name: m.name,
        files: m.files,
        read: (name: string) => {
          const f = m.files.find((x) => x.name === name)!;
          return retried(() => store.get(f.key, { sha256: f.sha256 }));
        },
        readToFile: fileReader(m.files, `model ${modelId}`),
      };
    },
    async readObject(bucket, key) {
      if (bucket !== store.bucket) {
        throw new ArtifactAccessError(
          `Cannot read s3://${bucket}/${key} as the bucket must be the service bucket ${store.bucket}`,
        );
      }
      if (key.startsWith("/") || key.split("/").includes("..")) {
        throw new ArtifactAccessError(
          `Cannot read s3://${bucket}/${key} as the key must be a plain relative key`,
        );
      }
      if (key.startsWith("tenants/") && !key.startsWith(`tenants/${job.tenantId}/`)) {
        throw new ArtifactAccessError(
          `Cannot read s3://${bucket}/${key} as keys under tenants/ must belong to this job's tenant`,
        );
      }
      try {
        return await retried(() => store.get(key));
      } catch (e) {
        const name = (e as { name?: string })?.name;
        if (name === "NoSuchKey" || name === "NotFound") return null;
        throw e;
      }
    },
  };

  return {
    jobId: job.id,
    tenantId: job.tenantId,
    attempt: job.attempt,
    workerId: fence.workerId,
    spec: state.spec,
    job,
    signal: state.signal,
    get draining() {
      return state.isDraining();
    },
    ...(state.executionProvider ? { executionProvider: state.executionProvider } : {}),
    log,
    async emit(type, data = {}) {
      // One key per call, reused by every retry: a retried append is stored once.
      const key = crypto.randomUUID();
      await fenced(() => appendEvent(db, fence, type, data, { key }));
    },
    async recordMetrics(step, values) {
      if (recorded.has(step)) {
        throw new RangeError(
          `Cannot record metrics of step ${step} as each step must be recorded once per run: it was recorded already`,
        );
      }
      await fenced(() => recordMetrics(db, fence, step, values));
      recorded.add(step);
    },
    async setProgress(progress) {
      await fenced(() => setProgress(db, fence, withEta(progress)));
      if (progress.stage !== stage) {
        stage = progress.stage;
        const key = crypto.randomUUID();
        const data = { stage, step: progress.step };
        await fenced(() => appendEvent(db, fence, "stage", data, { key }));
      }
    },
    saveCheckpoint(step, files) {
      return fenced(() => saveCheckpoint(db, store, writer, { step, files }));
    },
    async latestCheckpoint(): Promise<ResumePoint | null> {
      return resumePoint(await retried(() => latestCheckpoint(db, job.id)));
    },
    async checkpointAt(step: number): Promise<ResumePoint | null> {
      return resumePoint(await retried(() => getCheckpoint(db, job.id, step)));
    },
    artifacts,
    async publishRolloutPolicy(folder, files) {
      if (!/^(v(0|[1-9][0-9]{0,8})|base)$/.test(folder)) {
        throw new RangeError(
          `Cannot publish a rollout policy as its folder must be v<step> or base: current value is ${folder}`,
        );
      }
      const prefix = `${
        rolloutPolicyPrefix(job.tenantId, job.id)
      }${folder}/attempt-${state.fence.attempt}/`;
      for (const f of files) {
        if (!/^[A-Za-z0-9._-]{1,128}$/.test(f.name)) {
          throw new RangeError(`Cannot publish ${f.name} as its name must be a plain file name`);
        }
        await retried(() => store.put(prefix + f.name, f.bytes));
      }
      return `s3://${store.bucket}/${prefix}`;
    },
    async secret(name) {
      const cipher = state.secretCipher ??= secretCipherFromEnv();
      return await retried(() => readSecretValue(db, cipher, job.tenantId, name));
    },
    saveSkills(step, json, skillCount) {
      const count = skillCount ?? skillCountOf(json);
      return fenced(() => saveSkillLibrary(db, store, writer, { step, json, skillCount: count }));
    },
    saveTrajectories(dump) {
      return fenced(() => saveTrajectoryDump(db, store, writer, dump));
    },
    async commitStep(step, commit) {
      const skills = commit.skills && {
        json: commit.skills.json,
        skillCount: commit.skills.skillCount ?? skillCountOf(commit.skills.json),
      };
      // One key per event, reused by every retry of the commit: each is stored once.
      const events = (commit.events ?? []).map((e) => ({ ...e, key: crypto.randomUUID() }));
      await fenced(() =>
        commitStep(db, store, writer, step, {
          metrics: commit.metrics,
          checkpoint: commit.checkpoint,
          skills,
          trajectories: commit.trajectories,
          events,
        })
      );
      if (commit.metrics) recorded.add(step);
    },
    stepRecord(step) {
      return retried(() => stepRecord(db, job.id, step));
    },
  };
}

/** The length of a skill library JSON's `skills` array (0 when it has none). */
function skillCountOf(json: unknown): number {
  const skills = (json as { skills?: unknown })?.skills;
  return Array.isArray(skills) ? skills.length : 0;
}
