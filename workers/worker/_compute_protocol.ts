/**
 * Messages between the worker's control loop and a handler's compute process (compute.ts,
 * compute_process.ts), framed over a Unix socket. Everything is structured-serialisable: bytes
 * travel as `Uint8Array`s, errors as `{name, message}` (a class does not survive the boundary).
 */
import v8 from "node:v8";
import type { Job, JobSpec } from "../../jobs/mod.ts";
import type { ExecutionProvider } from "../engine/mod.ts";
import type { LogLevel } from "./logger.ts";

/** An error as it crosses the process boundary. */
export interface WireError {
  name: string;
  message: string;
}

/** A committed checkpoint as the compute process sees it: `handle` names it in `readPoint` calls. */
export interface WirePoint {
  handle: number;
  step: number;
  files: { name: string; key: string; bytes: number; sha256: string }[];
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
 * Writes one message as a frame: a 4-byte big-endian length, then the message in V8's
 * structured-serialisation format (`node:v8`), which keeps `Uint8Array`s and `Date`s.
 */
export async function writeFrame(
  writer: WritableStreamDefaultWriter<Uint8Array>,
  message: ToProcess | FromProcess,
): Promise<void> {
  const body = v8.serialize(message);
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length);
  frame.set(body, 4);
  await writer.write(frame);
}

/** Reads the frames of {@link writeFrame} from a byte stream until it ends. */
export async function* readFrames<T>(readable: ReadableStream<Uint8Array>): AsyncGenerator<T> {
  let buffer = new Uint8Array(0);
  for await (const chunk of readable) {
    const joined = new Uint8Array(buffer.length + chunk.length);
    joined.set(buffer);
    joined.set(chunk, buffer.length);
    buffer = joined;
    for (;;) {
      if (buffer.length < 4) break;
      const size = new DataView(buffer.buffer, buffer.byteOffset).getUint32(0);
      if (buffer.length < 4 + size) break;
      yield v8.deserialize(buffer.subarray(4, 4 + size)) as T;
      buffer = buffer.slice(4 + size);
    }
  }
}
