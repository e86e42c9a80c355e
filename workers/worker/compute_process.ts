/**
 * Entry of a compute process (started by compute.ts, which passes the path of its Unix socket in
 * `SEED_COMPUTE_SOCKET`): imports the handler module named in the `start` message, builds a
 * {@link JobContext} whose every write and read is a call to the control loop (which makes it
 * under the fence), runs the handler, and reports how it ended. Checkpoint files and reads of
 * stored files pass through the run's scratch folder (`SEED_COMPUTE_SCRATCH`), never the socket.
 * The process never touches the database or the store itself, and exits as soon as it finds the
 * socket closed (its worker is gone). On Linux the kernel also kills it (SIGKILL) the moment its
 * worker exits, even in the middle of synchronous code that would read the socket only later
 * (_parent_death.ts). It ignores SIGINT and SIGTERM: the worker decides when it stops (compute.ts).
 */
import type { HandlerOutcome, JobContext, JobHandler, ResumePoint } from "./handler.ts";
import type { Logger, LogLevel } from "../../jobs/mod.ts";
import {
  type CallOp,
  FrameTooLargeError,
  type FromProcess,
  fromWire,
  readFrames,
  type ToProcess,
  toWire,
  type WireFile,
  type WirePoint,
  writeFrame,
} from "./_compute_protocol.ts";
import { dieWithParent } from "./_parent_death.ts";

// The worker owns this process's lifetime (it drains on SIGINT/SIGTERM and stops this process
// with SIGKILL): a SIGINT or SIGTERM sent to every process of a group or cgroup must not end the
// step the worker is draining. compute.ts also starts this process in a group of its own.
Deno.addSignalListener("SIGINT", () => {});
Deno.addSignalListener("SIGTERM", () => {});
// Before the connect: a worker that exits after this line takes this process with it, and one
// that exited before it leaves no listener on the socket, so the connect fails.
dieWithParent();

const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
let nextId = 1;
let draining = false;
const conn = await Deno.connect({ transport: "unix", path: Deno.env.get("SEED_COMPUTE_SOCKET")! });
/** The run's scratch folder (compute.ts): checkpoint files and reads move through it. */
const scratch = Deno.env.get("SEED_COMPUTE_SCRATCH")!;
const writer = conn.writable.getWriter();
let writing: Promise<void> = Promise.resolve();
/**
 * Queues a message. A message over the frame limit is not sent and `onTooLarge` gets the error
 * (the call fails with it); any other write failure means the socket is gone: exit.
 */
const send = (m: FromProcess, onTooLarge?: (e: Error) => void) => {
  writing = writing.then(() => writeFrame(writer, m)).catch((e) => {
    if (e instanceof FrameTooLargeError && onTooLarge) onTooLarge(e);
    else Deno.exit(1);
  });
};

function call<T>(op: CallOp, ...args: unknown[]): Promise<T> {
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
    send({ kind: "call", id, op, args }, (e) => {
      pending.delete(id);
      reject(e);
    });
  });
}

let written = 0;
/**
 * Writes checkpoint files to the scratch folder and runs `fn` with their paths (the control loop
 * uploads them from there); the files are removed when `fn` settles.
 */
async function withFiles<T>(
  files: { name: string; bytes: Uint8Array }[],
  fn: (wire: WireFile[]) => Promise<T>,
): Promise<T> {
  const wire: WireFile[] = [];
  try {
    for (const f of files) {
      const path = `${scratch}/write-${++written}`;
      wire.push({ name: f.name, path });
      await Deno.writeFile(path, f.bytes);
    }
    return await fn(wire);
  } finally {
    await Promise.all(wire.map((f) => Deno.remove(f.path).catch(() => {})));
  }
}

/** Reads a file the control loop downloaded for us (its path is the reply), then removes it. */
async function readFromScratch(handle: number, name: string): Promise<Uint8Array> {
  const path = await call<string>("readPoint", handle, name);
  try {
    return await Deno.readFile(path);
  } finally {
    await Deno.remove(path).catch(() => {});
  }
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
    read: (name) => readFromScratch(w.handle, name),
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
    saveCheckpoint: (step, files) => withFiles(files, (wire) => call("saveCheckpoint", step, wire)),
    saveSkills: (step, json, count) => call("saveSkills", step, json, count),
    saveTrajectories: m.saveTrajectories ? (dump) => call("saveTrajectories", dump) : undefined,
    commitStep: (step, commit) =>
      withFiles(
        commit.checkpoint ?? [],
        (wire) =>
          call("commitStep", step, commit.checkpoint ? { ...commit, checkpoint: wire } : commit),
      ),
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
        const wire = await call<WirePoint | null>("artifacts.model", modelId);
        const p = point(wire);
        return p && { files: p.files, read: p.read, name: wire?.name ?? null };
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
