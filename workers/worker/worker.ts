/**
 * The worker loop (`deno task worker`): claims one job at a time for its device, runs the handler
 * registered for the job's method — the trainer in a compute process of its own (compute.ts) —
 * and meanwhile is the job's control loop: it heartbeats every `leaseMs / 3` (every second while
 * the database does not answer, so the lease is extended as soon as it is back), learns of a
 * cancel at once from a NOTIFY on `CANCEL_CHANNEL` (the heartbeat's answer as the fallback),
 * makes every fenced write, and ends the job under its fence — succeeded, failed with a
 * readable error, cancelled (the compute killed at once, its unfinished step never written), or
 * released back to the queue when draining. Idle, it waits for a NOTIFY with polling as the
 * fallback. A reaper (`jobs/reaper.ts`) runs beside it.
 */
import {
  acknowledgeCancel,
  type ArtifactStore,
  claimJob,
  createLogger,
  createWakeup,
  type Database,
  type Device,
  errorFields,
  failJob,
  type Fence,
  FenceLostError,
  fenceOf,
  isTransient,
  type Job,
  type Logger,
  parseStoredJobSpec,
  type Reaper,
  releaseJob,
  startReaper,
  succeedJob,
  type Wakeup,
} from "../../jobs/mod.ts";
import { z } from "zod";
import type { ProviderChoice } from "../engine/mod.ts";
import { startComputeProcess } from "./compute.ts";
import { createJobContext, removeRolloutPolicy } from "./context.ts";
import { startControlLoop } from "./control.ts";
import { defaultRegistry, type HandlerRegistry, JobCancelledError } from "./handler.ts";
import { untilReachable, withRetry } from "./retry.ts";
import { removeStaleScratch } from "./_scratch.ts";

/** Default lease: 30 s (heartbeat every 10 s). */
export const DEFAULT_LEASE_MS = 30_000;
/** Default polling interval when no NOTIFY arrives: 5 s. */
export const DEFAULT_POLL_MS = 5_000;

/** Options of {@link Worker}. */
export interface WorkerOptions {
  db: Database;
  store: ArtifactStore;
  /** Unique per process (default `worker-<hostname>-<pid>-<random>`). Part of every fence. */
  workerId?: string;
  /** Device class of jobs to claim (default cpu). */
  device?: Device;
  /**
   * The execution provider this process chose at start (`chooseExecutionProvider`), handed to
   * every job's handler; when given, each run's first event is `device` with the choice and why
   * the better providers were skipped. Absent: cpu, and no `device` event.
   */
  executionProvider?: ProviderChoice;
  /** Lease length in ms (default {@link DEFAULT_LEASE_MS}); heartbeat every leaseMs / 3. */
  leaseMs?: number;
  /** Idle polling interval in ms (default {@link DEFAULT_POLL_MS}). */
  pollMs?: number;
  /** Reaper scan interval in ms (default 5 000); 0 runs no reaper in this worker. */
  reaperIntervalMs?: number;
  /** Handlers by method (default {@link defaultRegistry}). */
  registry?: HandlerRegistry;
  logger?: Logger;
  /** How long transient database/S3 failures are retried, in ms (default 60 000). */
  retryForMs?: number;
}

/** How long a stopping worker waits for its subscription and reaper to stop, in ms. */
const STOP_DEADLINE_MS = 5_000;

/** Waits for `work` to settle, at most `ms`; a rejection goes to `onError`. */
async function settleWithin(
  ms: number,
  work: (Promise<unknown> | undefined)[],
  onError: (e: unknown) => void,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const settled = Promise.allSettled(work).then((results) => {
    for (const r of results) if (r.status === "rejected") onError(r.reason);
  });
  await Promise.race([settled, new Promise((resolve) => timer = setTimeout(resolve, ms))]);
  clearTimeout(timer);
}

/** How one claimed job ended, from this worker's point of view. */
export type RunResult = "succeeded" | "failed" | "cancelled" | "released" | "fence_lost";

/** Makes a unique worker id. */
export function makeWorkerId(): string {
  let host = "host";
  try {
    host = Deno.hostname();
  } catch { /* not permitted */ }
  return `worker-${host}-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
}

/** A readable, stack-free message for a job's error column. */
export function readableError(e: unknown): string {
  if (e instanceof z.ZodError) {
    return `Cannot run the job as its spec must be valid: ${z.prettifyError(e)}`;
  }
  if (e instanceof Error) {
    const msg = e.message || e.name;
    return e.name && e.name !== "Error" && !msg.startsWith(e.name) ? `${e.name}: ${msg}` : msg;
  }
  return `Handler failed: ${String(e)}`;
}

/**
 * The `device` event's data: the worker and its device class, the onnxruntime execution provider
 * the job's graphs run on, and each better provider skipped with its reason.
 */
export function deviceEvent(
  workerId: string,
  device: Device,
  choice: ProviderChoice,
): Record<string, unknown> {
  return {
    worker_id: workerId,
    device,
    execution_provider: choice.provider,
    skipped: choice.skipped.map((s) => ({ execution_provider: s.provider, reason: s.reason })),
  };
}

/** One worker process's loop (see module doc). */
export class Worker {
  /** This worker's id (part of every fence it holds). */
  readonly id: string;
  readonly device: Device;
  readonly leaseMs: number;
  #opts: WorkerOptions;
  #log: Logger;
  #registry: HandlerRegistry;
  #draining = false;
  #stop = new AbortController();
  #current: { fence: Fence; drain(): void } | undefined;

  constructor(options: WorkerOptions) {
    this.#opts = options;
    this.id = options.workerId ?? makeWorkerId();
    this.device = options.device ?? "cpu";
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.#registry = options.registry ?? defaultRegistry;
    this.#log = (options.logger ?? createLogger()).child({ workerId: this.id });
  }

  /** True once {@link drain} was called. */
  get draining(): boolean {
    return this.#draining;
  }

  /**
   * Drain (SIGTERM): claim nothing more; the running handler sees `ctx.draining`, checkpoints and
   * returns `"drained"`, and the job is released to the queue. {@link run} then resolves.
   */
  drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#log.info("draining", { jobId: this.#current?.fence.jobId });
    this.#current?.drain();
    this.#stop.abort();
  }

  /** Claims and runs jobs until {@link drain}. Resolves when the current job (if any) is done. */
  async run(): Promise<void> {
    const { db } = this.#opts;
    // Scratch folders of workers killed on this machine before they could remove them.
    const stale = await removeStaleScratch();
    if (stale.length) this.#log.info("removed stale scratch folders", { paths: stale });
    const reaperMs = this.#opts.reaperIntervalMs ?? 5_000;
    const reaper: Reaper | undefined = reaperMs > 0
      ? startReaper(db, {
        intervalMs: reaperMs,
        onReaped: (jobs) =>
          this.#log.info("reaped expired leases", {
            jobs: jobs.map((j) => ({ jobId: j.id, status: j.status, attempt: j.attempt })),
          }),
        onError: (e) => this.#log.warn("reaper scan failed", errorFields(e)),
      })
      : undefined;
    // The subscription is retried like a connection: a database that is down now is waited for.
    let wakeup: Wakeup | undefined;
    try {
      wakeup = await untilReachable(() => createWakeup(db, this.device), {
        signal: this.#stop.signal,
        onWait: (e, attempt) => {
          if (attempt === 1) {
            this.#log.warn("cannot subscribe to new work; retrying", errorFields(e));
          }
        },
      });
    } catch (e) {
      await reaper?.stop();
      if (this.#draining) return this.#log.info("worker stopped");
      throw e;
    }
    this.#log.info("worker started", {
      device: this.device,
      leaseMs: this.leaseMs,
      executionProvider: this.#opts.executionProvider?.provider ?? "cpu",
    });
    try {
      while (!this.#draining) {
        const result = await this.runOnce().catch((e) => {
          // An outage is expected and retried: a warning without the stack; anything else is an
          // error.
          const transient = isTransient(e);
          this.#log[transient ? "warn" : "error"](
            "claiming or finishing a job failed; retrying after the poll interval",
            transient ? { error: readableError(e) } : errorFields(e),
          );
          return null;
        });
        if (result === null && !this.#draining) {
          await wakeup.wait(this.#opts.pollMs ?? DEFAULT_POLL_MS, this.#stop.signal);
        }
      }
    } finally {
      // Bounded: during an outage a close waits for a connection that may not come back soon.
      await settleWithin(
        STOP_DEADLINE_MS,
        [wakeup.close(), reaper?.stop()],
        (e) => this.#log.warn("stopping the wake-up or the reaper failed", errorFields(e)),
      );
      this.#log.info("worker stopped");
    }
  }

  /** Claims one job and runs it to its end; null when no job was queued (or draining). */
  async runOnce(): Promise<{ job: Job; result: RunResult } | null> {
    if (this.#draining) return null;
    const job = await claimJob(this.#opts.db, {
      workerId: this.id,
      device: this.device,
      leaseMs: this.leaseMs,
    });
    if (!job) return null;
    return { job, result: await this.#runJob(job) };
  }

  async #runJob(job: Job): Promise<RunResult> {
    const { db, store } = this.#opts;
    const fence = fenceOf(job);
    const log = this.#log.child({ jobId: job.id, attempt: job.attempt });
    const abort = new AbortController();
    let cancelRequested = false;
    let fenceLost: FenceLostError | undefined;
    const loseFence = (e: FenceLostError) => {
      fenceLost ??= e;
      if (!abort.signal.aborted) abort.abort(e);
    };
    log.info("job claimed", { method: job.method });

    const control = await startControlLoop({
      db,
      fence,
      leaseMs: this.leaseMs,
      log,
      onCancel: () => {
        cancelRequested = true;
        abort.abort(new JobCancelledError(job.id));
      },
      onFenceLost: loseFence,
    });

    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    let running: { done: Promise<unknown>; drain(): void; stop(): void } | undefined;
    try {
      const entry = this.#registry.get(job.method);
      if (!entry) {
        const known = this.#registry.methods();
        throw new Error(
          `Cannot run job ${job.id} as method "${job.method}" must have a registered handler: this worker has ${
            known.length ? known.join(", ") : "none"
          }`,
        );
      }
      // a stored spec may hold fields of an earlier schema (jobs/spec.ts, parseStoredJobSpec)
      const spec = parseStoredJobSpec(job.spec);
      const ctx = createJobContext({
        db,
        store,
        job,
        spec,
        fence,
        signal: abort.signal,
        isDraining: () => this.#draining,
        onFenceLost: loseFence,
        log,
        retryForMs: this.#opts.retryForMs,
        executionProvider: this.#opts.executionProvider?.provider,
      });
      const choice = this.#opts.executionProvider;
      if (choice) await ctx.emit("device", deviceEvent(this.id, this.device, choice));
      running = entry.kind === "process"
        ? startComputeProcess(entry, ctx)
        : { done: entry.handler(ctx), drain() {}, stop() {} };
      this.#current = { fence, drain: running.drain };
      if (this.#draining) running.drain();
      // A cancel or a lost fence ends the run at once: the compute is stopped, not waited for.
      const stopped = new Promise<never>((_, reject) => {
        const onAbort = () => reject(abort.signal.reason);
        if (abort.signal.aborted) onAbort();
        else abort.signal.addEventListener("abort", onAbort, { once: true });
      });
      outcome = { ok: true, value: await Promise.race([running.done, stopped]) };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      running?.stop();
      await control.stop();
      this.#current = undefined;
    }
    const engine = (job.spec as { rollout?: { engine?: unknown } } | null)?.rollout?.engine;
    if (engine !== undefined && engine !== "local") {
      // the attempt's published rollout policies are loaded by now, or no longer wanted
      await removeRolloutPolicy(store, job, fence.attempt).catch((e) =>
        log.warn("rollout policy left for the sweeper", errorFields(e))
      );
    }

    return await this.#finish(fence, log, outcome, { fenceLost, cancelRequested });
  }

  /** Ends a run under its fence, from how its handler ended (see handler.ts's module doc). */
  async #finish(
    fence: Fence,
    log: Logger,
    outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
    how: { fenceLost?: FenceLostError; cancelRequested: boolean },
  ): Promise<RunResult> {
    const { db } = this.#opts;
    const retry = <T>(fn: () => Promise<T>) => withRetry(fn, { retryForMs: this.#opts.retryForMs });
    try {
      if (how.fenceLost) {
        log.warn("job abandoned: the fence was lost", { reason: how.fenceLost.message });
        return "fence_lost";
      }
      if (outcome.ok) {
        if (outcome.value === "drained") {
          const released = await retry(() => releaseJob(db, fence));
          log.info("job released while draining", { status: released.status });
          return released.status === "cancelled" ? "cancelled" : "released";
        }
        const ended = await retry(() => succeedJob(db, fence));
        if (ended.status === "cancelled") {
          log.info("job cancelled: the cancel arrived as the run ended");
          return "cancelled";
        }
        log.info("job succeeded");
        return "succeeded";
      }
      if (how.cancelRequested) {
        await retry(() => acknowledgeCancel(db, fence));
        log.info("job cancelled");
        return "cancelled";
      }
      const message = readableError(outcome.error);
      log.error("job failed", { ...errorFields(outcome.error) });
      const ended = await retry(() => failJob(db, fence, message));
      if (ended.status === "cancelled") {
        log.info("job cancelled: the cancel arrived as the run failed");
        return "cancelled";
      }
      return "failed";
    } catch (e) {
      if (e instanceof FenceLostError) {
        log.warn("job abandoned: the fence was lost while finishing", errorFields(e));
        return "fence_lost";
      }
      throw e;
    }
  }
}
