/**
 * Messages between the worker's control loop and a handler's compute process (compute.ts,
 * compute_process.ts), framed over a Unix socket. Everything is structured-serialisable: small
 * bytes travel as `Uint8Array`s, errors as `{name, message}` (a class does not survive the
 * boundary). Large state does not travel here: checkpoint files and files read back (resume
 * points, uploaded models) are files in the run's scratch folder, and frames carry their paths
 * ({@link WireFile}; workers/worker/README.md, "State transfer").
 */
import v8 from "node:v8";
import type { Job, JobSpec, LogLevel } from "../../jobs/mod.ts";
import type { ExecutionProvider } from "../engine/mod.ts";

/** An error as it crosses the process boundary. */
export interface WireError {
  name: string;
  message: string;
}

/**
 * A committed checkpoint as the compute process sees it: `handle` names it in `readPoint` calls.
 */
export interface WirePoint {
  handle: number;
  step: number;
  files: { name: string; key: string; bytes: number; sha256: string }[];
  /** An uploaded model's upload name (`artifacts.model` only). */
  name?: string | null;
}

/**
 * The calls a compute process makes; each maps to the {@link JobContext} method of the same name
 * (`readPoint` reads a file of a {@link WirePoint}; `artifacts.*` are the reader's methods).
 */
export type CallOp =
  | "emit"
  | "recordMetrics"
  | "setProgress"
  | "saveCheckpoint"
  | "saveSkills"
  | "saveTrajectories"
  | "commitStep"
  | "stepRecord"
  | "latestCheckpoint"
  | "checkpointAt"
  | "readPoint"
  | "artifacts.checkpoint"
  | "artifacts.readObject"
  | "artifacts.model"
  | "secret"
  | "publishRolloutPolicy";

/**
 * A checkpoint file as the compute process hands it over: written to `path` in the run's scratch
 * folder (`SEED_COMPUTE_SCRATCH`), uploaded from there by the control loop.
 */
export interface WireFile {
  name: string;
  path: string;
}

/** Control loop → compute process. */
export type ToProcess =
  | {
    kind: "start";
    module: string;
    options: unknown;
    job: Job;
    spec: JobSpec;
    draining: boolean;
    saveTrajectories: boolean;
    /** The worker's execution provider (absent: cpu). */
    executionProvider?: ExecutionProvider;
  }
  | { kind: "reply"; id: number; ok: true; value: unknown }
  | { kind: "reply"; id: number; ok: false; error: WireError }
  | { kind: "drain" };

/** Compute process → control loop. */
export type FromProcess =
  | { kind: "call"; id: number; op: CallOp; args: unknown[] }
  | { kind: "log"; level: LogLevel; msg: string; fields?: Record<string, unknown> }
  | { kind: "done"; outcome: string | undefined }
  | { kind: "failed"; error: WireError };

/** An error (or anything thrown) as a {@link WireError}. */
export function toWire(e: unknown): WireError {
  if (e instanceof Error) return { name: e.name, message: e.message };
  return { name: "Error", message: String(e) };
}

/** A {@link WireError} as an Error with the same name and message. */
export function fromWire(w: WireError): Error {
  const e = new Error(w.message);
  e.name = w.name;
  return e;
}

/**
 * Largest frame either side writes or reads: 256 MiB. Large state (checkpoint files, resume reads,
 * uploaded-model reads) never crosses the socket: it moves as files in the run's scratch folder
 * and only their paths travel (compute.ts). The cap keeps a stray large message from stalling the
 * control loop that heartbeats, and keeps its length far below the 32-bit length field's 4 GiB.
 */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024;

/** A frame over {@link MAX_FRAME_BYTES}, refused by the writer or the reader. */
export class FrameTooLargeError extends Error {
  constructor(readonly bytes: number, readonly op: "write" | "read") {
    super(
      `Cannot ${op} a compute-process message as it must be at most ${MAX_FRAME_BYTES} bytes: ` +
        `it is ${bytes} bytes (large state moves as files; see workers/worker/README.md)`,
    );
    this.name = "FrameTooLargeError";
  }
}

/**
 * Writes one message as a frame: a 4-byte big-endian length, then the message in V8's
 * structured-serialisation format (`node:v8`), which keeps `Uint8Array`s and `Date`s.
 * @throws FrameTooLargeError when the serialised message is over {@link MAX_FRAME_BYTES}.
 */
export async function writeFrame(
  writer: WritableStreamDefaultWriter<Uint8Array>,
  message: ToProcess | FromProcess,
): Promise<void> {
  const body = v8.serialize(message);
  if (body.length > MAX_FRAME_BYTES) throw new FrameTooLargeError(body.length, "write");
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length);
  frame.set(body, 4);
  await writer.write(frame);
}

/**
 * Reads the frames of {@link writeFrame} from a byte stream until it ends. Linear in the bytes
 * read: chunks are kept as received and each frame's bytes are joined once, when it is whole.
 * @throws FrameTooLargeError at a length prefix over {@link MAX_FRAME_BYTES}.
 */
export async function* readFrames<T>(readable: ReadableStream<Uint8Array>): AsyncGenerator<T> {
  const chunks: Uint8Array[] = [];
  let buffered = 0;
  /** Removes and returns the first `n` buffered bytes (n ≤ buffered). */
  const take = (n: number): Uint8Array => {
    if (n === 0) return new Uint8Array(0);
    const first = chunks[0];
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) chunks.shift();
      else chunks[0] = first.subarray(n);
      buffered -= n;
      return out;
    }
    const out = new Uint8Array(n);
    for (let at = 0; at < n;) {
      const c = chunks[0];
      const k = Math.min(c.length, n - at);
      out.set(c.subarray(0, k), at);
      at += k;
      if (k === c.length) chunks.shift();
      else chunks[0] = c.subarray(k);
    }
    buffered -= n;
    return out;
  };
  let size = -1; // the current frame's body length once its prefix is read
  for await (const chunk of readable) {
    chunks.push(chunk);
    buffered += chunk.length;
    for (;;) {
      if (size < 0) {
        if (buffered < 4) break;
        const head = take(4);
        size = new DataView(head.buffer, head.byteOffset, 4).getUint32(0);
        if (size > MAX_FRAME_BYTES) throw new FrameTooLargeError(size, "read");
      }
      if (buffered < size) break;
      const body = take(size);
      size = -1;
      yield v8.deserialize(body) as T;
    }
  }
}
