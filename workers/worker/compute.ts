/**
 * The control loop's side of a compute process: runs a {@link ProcessHandler} in a child Deno
 * process of its own (compute_process.ts) and serves the child's calls against the run's real
 * {@link JobContext}, so every database and store write is made here, under the fence, by the
 * event loop that also heartbeats. A synchronous stretch of the handler (one long onnxruntime
 * call) blocks only the child; `stop()` kills it with SIGKILL, at once, wherever it is.
 *
 * Why a process and not a Deno Worker thread: `Worker.terminate()` does not stop a thread that
 * is busy in synchronous code (measured with Deno 2.9: the thread kept spinning, and kept the
 * process from exiting), so a cancelled step could go on burning the CPU the next job needs.
 *
 * Large state never crosses the socket as one message (workers/worker/README.md, "State
 * transfer"): the run's temporary folder (`$TMPDIR/seed-compute-{worker pid}-*`, removed when the
 * run stops) is also its scratch folder. The child writes checkpoint files there and sends their
 * paths; this side uploads them in parts (jobs/store.ts `putFile`). A resume or model read is
 * downloaded there, verified, and its path sent back (`getToFile`). Memory on this side is one
 * upload part, and the event loop that heartbeats never parses a large frame. A worker killed with
 * SIGKILL leaves its folder behind; the next worker to start removes it (_scratch.ts: the folder's
lock, held by this side while the run lives, tells a live folder from a left one).
 *
 * The two talk over a Unix socket in that folder (stdout stays the handler's). A
 * worker killed with SIGKILL closes the socket; on Linux the kernel then kills the child at once
 * (`PR_SET_PDEATHSIG`, _parent_death.ts), and elsewhere the child exits when it next reads the
 * socket, that is when the onnxruntime call in progress returns. Calls arriving after `stop()`
 * are not served, so nothing the child computes after a cancel or a lost fence is written.
 *
 * Signals: the worker alone owns the child's lifetime. The child runs in a process group (and
 * session) of its own, so Ctrl-C in a terminal, which signals the whole foreground group,
 * reaches only the worker, which drains: the child must live on to finish its step and
 * checkpoint. (The child also ignores SIGINT/SIGTERM, for a supervisor that signals every
 * process of a cgroup.) A worker that exits (`Deno.exit`, e.g. on a second Ctrl-C) kills its
 * live children on the way out.
 */
import { dirname, join, resolve } from "node:path";
import { createScratch, type Scratch } from "./_scratch.ts";
import type { HandlerOutcome, JobContext, ResumePoint, StepCommit } from "./handler.ts";
import {
  type CallOp,
  type FromProcess,
  fromWire,
  readFrames,
  type ToProcess,
  toWire,
  type WireFile,
  type WirePoint,
  writeFrame,
} from "./_compute_protocol.ts";

/** A handler running in its compute process. */
export interface ComputeProcess {
  /** Settles when the handler returns (its outcome) or throws (its error, name and message). */
  readonly done: Promise<HandlerOutcome | void>;
  /** Tells the handler the worker is draining (`ctx.draining` becomes true in the child). */
  drain(): void;
  /** Kills the child at once (SIGKILL); `done` then never settles. Idempotent. */
  stop(): void;
}

const ENTRY = new URL("./compute_process.ts", import.meta.url);
const CONFIG = new URL("../../deno.json", import.meta.url);

/**
 * Starts `entry.module`'s handler for the run of `ctx` in a new child process (see module doc).
 * @param entry.module file URL of a module exporting `createHandler(options): JobHandler`.
 * @param entry.options structured-serialisable options passed to `createHandler`.
 */
export function startComputeProcess(
  entry: { module: string; options: unknown },
  ctx: JobContext,
): ComputeProcess {
  let stopped = false;
  let child: Deno.ChildProcess | undefined;
  let writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
  let dir: Scratch | undefined;
  const removeDir = () => dir?.remove();
  const stop = () => {
    if (stopped) return;
    stopped = true;
    globalThis.removeEventListener("unload", stop);
    try {
      child?.kill("SIGKILL");
    } catch { /* already exited */ }
    writer?.close().catch(() => {});
    removeDir();
  };
  // In its own process group the child no longer dies with the worker's group: kill it when
  // the worker process exits.
  globalThis.addEventListener("unload", stop);
  const post = (m: ToProcess) => {
    if (!stopped && writer) writeFrame(writer, m).catch(() => {});
  };
  let draining = false;
  const done = (async (): Promise<HandlerOutcome | void> => {
    dir = await createScratch();
    const scratch = dir.path;
    if (stopped) removeDir();
    const path = join(scratch, "socket");
    let conn: Deno.Conn;
    const listener = Deno.listen({ transport: "unix", path });
    try {
      if (stopped) return await never();
      child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--config", CONFIG.pathname, ENTRY.pathname],
        env: { SEED_COMPUTE_SOCKET: path, SEED_COMPUTE_SCRATCH: scratch },
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
        // setsid: a signal to the worker's process group (Ctrl-C) does not reach the child.
        detached: true,
      }).spawn();
      const exited = child.status.then((s) => {
        throw new Error(`The compute process exited with code ${s.code} before it connected`);
      });
      conn = await Promise.race([listener.accept(), exited]);
    } finally {
      listener.close();
      await Deno.remove(path).catch(() => {});
    }
    if (stopped) {
      conn.close();
      return await never(); // stopped while it started: it was killed
    }
    writer = conn.writable.getWriter();
    post({
      kind: "start",
      module: entry.module,
      options: entry.options,
      job: ctx.job,
      spec: ctx.spec,
      draining: draining || ctx.draining,
      saveTrajectories: ctx.saveTrajectories !== undefined,
      executionProvider: ctx.executionProvider,
    });
    return await serveCalls(conn, ctx, {
      post,
      stop,
      isStopped: () => stopped,
      child,
      scratch,
    });
  })();
  return {
    done,
    drain() {
      draining = true;
      post({ kind: "drain" });
    },
    stop,
  };
}

/** A promise that never settles (the run was stopped from outside). */
const never = () => new Promise<never>(() => {});

/** Serves the child's calls until it reports how its handler ended. */
async function serveCalls(
  conn: Deno.Conn,
  ctx: JobContext,
  io: {
    post(m: ToProcess): void;
    stop(): void;
    isStopped(): boolean;
    child: Deno.ChildProcess;
    /** The run's scratch folder (see module doc). */
    scratch: string;
  },
): Promise<HandlerOutcome | void> {
  const { post, stop, child, scratch } = io;
  /** The child's files, each checked to lie in the scratch folder. */
  const inScratch = (files: WireFile[]): WireFile[] => {
    for (const f of files) {
      if (typeof f?.path !== "string" || dirname(resolve(f.path)) !== scratch) {
        throw new RangeError(
          `Cannot upload checkpoint file ${f?.name} as its path must lie in the run's scratch folder ${scratch}: current value is ${f?.path}`,
        );
      }
    }
    return files.map((f) => ({ name: f.name, path: f.path }));
  };
  let reads = 0;
  const points = new Map<number, ResumePoint>();
  const wirePoint = (p: ResumePoint | null): WirePoint | null => {
    if (!p) return null;
    const handle = points.size + 1;
    points.set(handle, p);
    return { handle, step: p.step, files: p.files };
  };
  const serve = async (op: CallOp, args: unknown[]): Promise<unknown> => {
    const a = args as never[];
    switch (op) {
      case "emit":
        return await ctx.emit(a[0], a[1]);
      case "recordMetrics":
        return await ctx.recordMetrics(a[0], a[1]);
      case "setProgress":
        return await ctx.setProgress(a[0]);
      // The run's context (context.ts) hands checkpoint files to jobs/, which uploads a file
      // given by path in parts (CheckpointFileInput): the bytes never enter this process whole.
      case "saveCheckpoint":
        return await ctx.saveCheckpoint(a[0], inScratch(a[1]) as never);
      case "saveSkills":
        return await ctx.saveSkills(a[0], a[1], a[2]);
      case "saveTrajectories":
        return await ctx.saveTrajectories!(a[0]);
      case "commitStep": {
        const commit = a[1] as StepCommit & { checkpoint?: WireFile[] };
        const files = commit.checkpoint && inScratch(commit.checkpoint);
        return await ctx.commitStep(a[0], { ...commit, checkpoint: files as never });
      }
      case "stepRecord":
        return await ctx.stepRecord(a[0]);
      case "latestCheckpoint":
        return wirePoint(await ctx.latestCheckpoint());
      case "checkpointAt":
        return wirePoint(await ctx.checkpointAt(a[0]));
      case "artifacts.checkpoint":
        return wirePoint(await ctx.artifacts.checkpoint(a[0], a[1]));
      case "artifacts.readObject":
        return await ctx.artifacts.readObject(a[0], a[1]);
      case "artifacts.model": {
        // An uploaded model is a checkpoint-like file set without a step (0 on the wire).
        const model = ctx.artifacts.model ? await ctx.artifacts.model(a[0]) : null;
        const wire = wirePoint(model && { ...model, step: 0 });
        return wire && { ...wire, name: model?.name ?? null };
      }
      case "publishRolloutPolicy":
        if (!ctx.publishRolloutPolicy) {
          throw new RangeError("Cannot publish a rollout policy as this run has no store");
        }
        return await ctx.publishRolloutPolicy(a[0], a[1]);
      case "secret":
        if (!ctx.secret) throw new RangeError("Cannot read a secret as this run has no database");
        return await ctx.secret(a[0]);
      case "readPoint": {
        const point = points.get(a[0]);
        if (!point) throw new RangeError(`Cannot read from checkpoint handle ${a[0]}: unknown`);
        // Downloaded to a file the child reads (and removes): its path is the reply.
        const path = join(scratch, `read-${++reads}`);
        if (point.readToFile) await point.readToFile(a[1], path);
        else await Deno.writeFile(path, await point.read(a[1]));
        return path;
      }
    }
  };
  for await (const m of readFrames<FromProcess>(conn.readable)) {
    if (io.isStopped()) break;
    switch (m.kind) {
      case "call":
        serve(m.op, m.args).then(
          (value) => post({ kind: "reply", id: m.id, ok: true, value }),
          (error) => post({ kind: "reply", id: m.id, ok: false, error: toWire(error) }),
        );
        break;
      case "log":
        ctx.log[m.level](m.msg, m.fields);
        break;
      case "done":
        stop();
        return m.outcome as HandlerOutcome | undefined;
      case "failed":
        stop();
        throw fromWire(m.error);
    }
  }
  if (io.isStopped()) return await never(); // stopped from outside: never settles
  const status = await child.status;
  throw new Error(
    `The compute process ended before its handler did (exit code ${status.code}${
      status.signal ? `, signal ${status.signal}` : ""
    })`,
  );
}
