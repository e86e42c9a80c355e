/**
 * Entry of a compute process (started by compute.ts, which passes the path of its Unix socket in
 * `SEED_COMPUTE_SOCKET`): imports the handler module named in the `start` message, builds a
 * {@link JobContext} whose every write and read is a call to the control loop (which makes it
 * under the fence), runs the handler, and reports how it ended. The process never touches the
 * database or the store itself, and exits as soon as it finds the socket closed (its worker
 * is gone). It ignores SIGINT and SIGTERM: the worker decides when it stops (compute.ts).
 */
import type { HandlerOutcome, JobContext, JobHandler, ResumePoint } from "./handler.ts";
import type { Logger, LogLevel } from "./logger.ts";
import {
  type CallOp,
  type FromProcess,
  fromWire,
  readFrames,
  type ToProcess,
  toWire,
  type WirePoint,
  writeFrame,
} from "./_compute_protocol.ts";

// The worker owns this process's lifetime (it drains on SIGINT/SIGTERM and stops this process
// with SIGKILL): a SIGINT or SIGTERM sent to every process of a group or cgroup must not end the
// step the worker is draining. compute.ts also starts this process in a group of its own.
Deno.addSignalListener("SIGINT", () => {});
Deno.addSignalListener("SIGTERM", () => {});

const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
let nextId = 1;
let draining = false;
const conn = await Deno.connect({ transport: "unix", path: Deno.env.get("SEED_COMPUTE_SOCKET")! });
const writer = conn.writable.getWriter();
let writing: Promise<void> = Promise.resolve();
const send = (m: FromProcess) => {
  writing = writing.then(() => writeFrame(writer, m)).catch(() => Deno.exit(1));
};

function call<T>(op: CallOp, ...args: unknown[]): Promise<T> {
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
    send({ kind: "call", id, op, args });
  });
}

function relayLogger(bound: Record<string, unknown>): Logger {
  const at = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) =>
    send({ kind: "log", level, msg, fields: { ...bound, ...fields } });
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (more) => relayLogger({ ...bound, ...more }),
  };
}

const point = (w: WirePoint | null): ResumePoint | null =>
  w && {
    step: w.step,
    files: w.files,
    read: (name) => call<Uint8Array>("readPoint", w.handle, name),
  };

async function start(
  m: Extract<ToProcess, { kind: "start" }>,
): Promise<HandlerOutcome | void> {
  const { job, spec } = m;
  draining = m.draining;
  const mod = await import(m.module) as { createHandler?: (options: unknown) => JobHandler };
  if (typeof mod.createHandler !== "function") {
    throw new TypeError(
      `Cannot run a handler from ${m.module} as it must export createHandler(options)`,
    );
  }
  const handler = mod.createHandler(m.options);
  // Aborts never arrive here: a cancel or a lost fence kills the process instead.
  const signal = new AbortController().signal;
  const ctx: JobContext = {
    jobId: job.id,
    tenantId: job.tenantId,
    attempt: job.attempt,
    workerId: job.workerId ?? "",
    spec,
    job,
    signal,
    get draining() {
      return draining;
    },
    ...(m.executionProvider ? { executionProvider: m.executionProvider } : {}),
    log: relayLogger({}),
    emit: (type, data) => call("emit", type, data),
    recordMetrics: (step, values) => call("recordMetrics", step, values),
    setProgress: (progress) => call("setProgress", progress),
    saveCheckpoint: (step, files) => call("saveCheckpoint", step, files),
    saveSkills: (step, json, count) => call("saveSkills", step, json, count),
    saveTrajectories: m.saveTrajectories ? (dump) => call("saveTrajectories", dump) : undefined,
    commitStep: (step, commit) => call("commitStep", step, commit),
    stepRecord: (step) => call("stepRecord", step),
    latestCheckpoint: async () => point(await call<WirePoint | null>("latestCheckpoint")),
    checkpointAt: async (step) => point(await call<WirePoint | null>("checkpointAt", step)),
    secret: (name) => call("secret", name),
    publishRolloutPolicy: (folder, files) => call("publishRolloutPolicy", folder, files),
    artifacts: {
      checkpoint: async (jobId, step) =>
        point(await call<WirePoint | null>("artifacts.checkpoint", jobId, step)),
      readObject: (bucket, key) => call("artifacts.readObject", bucket, key),
      model: async (modelId) => {
        const p = point(await call<WirePoint | null>("artifacts.model", modelId));
        return p && { files: p.files, read: p.read };
      },
    },
  };
  return await handler(ctx);
}

/** Reports how the handler ended, waits for the report to be written, and exits. */
async function finish(m: FromProcess): Promise<never> {
  send(m);
  await writing;
  Deno.exit(0);
}

for await (const m of readFrames<ToProcess>(conn.readable)) {
  switch (m.kind) {
    case "start":
      start(m).then(
        (outcome) => finish({ kind: "done", outcome: outcome ?? undefined }),
        (error) => finish({ kind: "failed", error: toWire(error) }),
      );
      break;
    case "reply": {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.ok) p?.resolve(m.value);
      else p?.reject(fromWire(m.error));
      break;
    }
    case "drain":
      draining = true;
      break;
  }
}
// The socket closed: the worker is gone (or killed us). Nothing more of this run may happen.
Deno.exit(1);
