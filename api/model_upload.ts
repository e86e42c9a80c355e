/**
 * Reads a Hugging Face folder sent as a tar stream (`POST /v1/models`) into the store without
 * holding its weights: small files (JSON, text) are buffered whole, each `.safetensors` file is
 * streamed to the store (multipart above the store's part size, jobs/store.ts `putStream`) while
 * its header is captured for the model check. Files the service does not use (README, LICENSE,
 * `.bin` weights, a checkpoint's `optimizer.safetensors` and `trainer_state.json`, …) are skipped:
 * counted, and the first {@link MAX_SKIPPED_LISTED} named, so an archive of many entries costs no
 * memory per entry. Every kept `.json` file that parses is held to the request bodies' limits
 * (api/json_limits.ts: depth, U+0000, lone surrogates) and refused with a 422 naming it otherwise:
 * its contents reach the database (`config.json`) or a job. Every object an upload wrote is
 * deleted before its error is thrown.
 */
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { extract as tarExtract } from "tar-stream";
import type { ArtifactStore, CheckpointFile } from "../jobs/mod.ts";
import { FILE_NAME_PATTERN } from "../jobs/mod.ts";
import { BadRequestError, PayloadTooLargeError, UnprocessableError } from "./errors.ts";
import { jsonLimitIssue } from "./json_limits.ts";

/** How many skipped entry names an upload's answer lists (all are counted). */
export const MAX_SKIPPED_LISTED = 100;

/** Size limits of an upload, bytes. */
export interface ModelUploadLimits {
  /** Whole archive (default 64 GiB). */
  totalBytes: number;
  /** One buffered small file, e.g. tokenizer.json (default 64 MiB). */
  smallFileBytes: number;
  /** Files kept (default 256). */
  files: number;
}

/** Default {@link ModelUploadLimits}. */
export const DEFAULT_MODEL_UPLOAD_LIMITS: ModelUploadLimits = {
  totalBytes: 64 * 1024 ** 3,
  smallFileBytes: 64 * 1024 ** 2,
  files: 256,
};

/** Largest safetensors header (the reference implementation's limit). */
const MAX_HEADER_BYTES = 100_000_000;

/** Small files kept (buffered whole); every `*.safetensors` file is kept too. */
const SMALL_FILES = /^(?:[\w.-]+\.json|merges\.txt|[\w.-]+\.jinja|tokenizer\.model)$/;

/**
 * Files of a training run's checkpoint that are no part of the model: the optimizer's moments
 * (`optimizer.safetensors`, as large as the weights or twice) and the trainer's state
 * (`trainer_state.json`). A job checkpoint uploaded as a model keeps its weights and tokenizer;
 * these are skipped and listed with the other skipped files.
 */
const TRAINING_STATE_FILES = new Set(["optimizer.safetensors", "trainer_state.json"]);

/** Whether `name` (a file name in the folder) is a model file the upload keeps. */
function isModelFile(name: string): boolean {
  return !TRAINING_STATE_FILES.has(name) &&
    (name.endsWith(".safetensors") || SMALL_FILES.test(name));
}

/** What the archive held. */
export interface ModelUpload {
  small: Map<string, Uint8Array>;
  safetensors: Map<string, { header: Record<string, unknown>; dataBytes: number }>;
  /** Every kept file as stored. */
  files: CheckpointFile[];
  /** The first {@link MAX_SKIPPED_LISTED} entry names skipped (not used by the service). */
  skipped: string[];
  /** How many entries were skipped in all. */
  skippedCount: number;
  /** Hex SHA-256 of the whole archive. */
  sha256: string;
}

/** 400 for an upload without bytes (no body, or an empty one), naming the body. */
export function emptyUploadError(): BadRequestError {
  const message = "must be a tar archive of the model folder: it is empty";
  return new BadRequestError(`Cannot read the upload as the request body ${message}`, {
    errors: [{ path: "body", code: "empty", message }],
  });
}

/** 400 at `body` for an archive whose layout cannot be a model folder. */
function layoutError(why: string, code: string): BadRequestError {
  const message = `must be a tar archive of one model folder: ${why}`;
  return new BadRequestError(`Cannot read the upload as the request body ${message}`, {
    errors: [{ path: "body", code, message }],
  });
}

/** An entry name as it may appear in a message: JSON-quoted (control characters escaped), cut. */
const quoted = (name: string) =>
  JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name);

/**
 * The parts of an entry's path (`./` and empty parts dropped).
 * @throws BadRequestError (at `body`) for an absolute path or a `..` part: such an entry names a
 *   place outside the folder, which no `tar -cf` of a folder writes (GNU tar strips both).
 */
function pathParts(name: string): string[] {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (name.startsWith("/") || parts.includes("..")) {
    throw layoutError(
      `entry ${quoted(name)} must be a relative path inside the folder (no leading / or ..)`,
      "unsafe_path",
    );
  }
  return parts;
}

/**
 * Where the entries lie, decided as they stream: the archive is either the folder's files at the
 * top (`tar -cf - -C DIR .`: any file or link at the top makes it so, and files in subfolders are
 * skipped) or one folder holding them (`tar -cf - DIR`: the folder's name is dropped). Until a
 * top-level file arrives, files one folder deep are kept tentatively; the first top-level file
 * drops them. An archive with no top-level file and two top-level folders is refused at the end.
 */
class ArchiveLayout {
  /** Top-level folders seen (from files under them and from directory entries). */
  readonly folders = new Set<string>();
  /** Whether a (non-hidden) entry other than a folder lies at the top. */
  flat = false;

  /**
   * Places one entry: its name in the folder when it may be kept (with `folder` when it lies in a
   * top-level folder), null when it is skipped (hidden, a subfolder's, not a regular file).
   * @throws BadRequestError for an unsafe path ({@link pathParts}).
   */
  place(header: { name: string; type?: string | null }): { name: string; folder?: string } | null {
    const parts = pathParts(header.name);
    // Hidden files and folders (.gitattributes, .git/, .cache/huggingface/) are skipped, not
    // refused: every Hugging Face clone or `--local-dir` download holds some.
    if (parts.length === 0 || parts.some((p) => p.startsWith("."))) return null;
    const isFolder = header.type === "directory";
    if (parts.length > 1 || isFolder) this.folders.add(parts[0]);
    // Any other entry at the top (a file, a symbolic link) is one of the folder's files.
    else this.flat = true;
    if (header.type !== "file") return null;
    if (parts.length > 2 || (parts.length === 2 && this.flat)) return null;
    const name = parts.at(-1)!;
    const folder = parts.length === 2 ? parts[0] : undefined;
    return FILE_NAME_PATTERN.test(name) ? { name, folder } : null;
  }

  /** @throws BadRequestError when the archive holds two top-level folders and no file beside. */
  finish(): void {
    if (this.flat || this.folders.size < 2) return;
    const some = [...this.folders].slice(0, 3).map((f) => quoted(`${f}/`)).join(", ");
    throw layoutError(
      `it must hold the folder's files or one folder: it holds ${this.folders.size} top-level folders (${some})`,
      "two_folders",
    );
  }
}

/**
 * Streams `body` (a tar archive) into the store under `prefix`; with `store` null only hashes
 * it (an idempotent retry whose model exists). On any error the objects already written are
 * deleted before the error is rethrown.
 * @throws PayloadTooLargeError past `limits.totalBytes`; BadRequestError (at `body`) for an empty
 *   body, an archive without entries, a malformed or truncated archive, a body stream that fails
 *   (the client went away), duplicate names, an entry with an absolute path or `..`, or two
 *   top-level folders ({@link ArchiveLayout}); UnprocessableError for a safetensors file without
 *   a readable header or a small file over its limit. Hidden entries are skipped and listed.
 */
export async function readModelUpload(
  body: ReadableStream<Uint8Array>,
  target: { store: Pick<ArtifactStore, "put" | "putStream" | "delete"> | null; prefix: string },
  limits: ModelUploadLimits = DEFAULT_MODEL_UPLOAD_LIMITS,
): Promise<ModelUpload> {
  const hash = createHash("sha256");
  let total = 0;
  async function* counted() {
    for await (const chunk of body) {
      total += chunk.byteLength;
      if (total > limits.totalBytes) throw new PayloadTooLargeError(limits.totalBytes);
      hash.update(chunk);
      yield chunk;
    }
  }
  const out: ModelUpload = {
    small: new Map(),
    safetensors: new Map(),
    files: [],
    skipped: [],
    skippedCount: 0,
    sha256: "",
  };
  const skip = (entryName: string) => {
    out.skippedCount++;
    if (out.skipped.length < MAX_SKIPPED_LISTED) out.skipped.push(entryName);
  };
  /** Keys written so far (a file is written before its checks end): deleted on any error. */
  const written = new Set<string>();
  const extract = tarExtract();
  const source = Readable.from(counted());
  let sourceError: unknown;
  source.on("error", (e) => {
    sourceError = e;
    extract.destroy(e);
  });
  source.pipe(extract);
  const store = target.store;
  const layout = new ArchiveLayout();
  /** Files kept tentatively (one folder deep): name in the folder → entry name and folder. */
  const tentative = new Map<string, { entryName: string; folder: string }>();
  const dropTentative = async () => {
    for (const [name, { entryName }] of tentative) {
      const file = out.files.find((f) => f.name === name)!;
      if (store) await store.delete(file.key);
      written.delete(file.key);
      out.files.splice(out.files.indexOf(file), 1);
      out.small.delete(name);
      out.safetensors.delete(name);
      skip(entryName);
    }
    tentative.clear();
  };
  try {
    for await (const entry of extract) {
      const place = layout.place(entry.header);
      if (layout.flat && tentative.size > 0) await dropTentative();
      const name = place?.name ?? null;
      const keep = name !== null && isModelFile(name) &&
        // A second folder's file of that name: two top-level folders (refused at the end) or
        // two subfolders of a flat archive (both dropped once its top-level file arrives).
        !(place!.folder !== undefined &&
          (tentative.get(name)?.folder ?? place!.folder) !== place!.folder);
      if (!keep || out.files.length >= limits.files) {
        if (entry.header.type !== "directory") skip(entry.header.name);
        for await (const _ of entry) { /* skipped: drain */ }
        continue;
      }
      if (out.files.some((f) => f.name === name)) {
        throw new BadRequestError(
          `Cannot accept the archive as file names must be unique: ${name} appears twice`,
        );
      }
      if (place!.folder !== undefined) {
        tentative.set(name, { entryName: entry.header.name, folder: place!.folder });
      }
      const key = `${target.prefix}${name}`;
      if (name.endsWith(".safetensors")) {
        const head = new HeaderCapture(name);
        const chunks = (async function* () {
          for await (const chunk of entry) {
            head.push(chunk as Uint8Array);
            yield chunk as Uint8Array;
          }
        })();
        if (store) written.add(key);
        const stored = store ? await store.putStream(key, chunks) : await drain(chunks);
        out.safetensors.set(name, head.result(stored.bytes));
        out.files.push({ name, key, bytes: stored.bytes, sha256: stored.sha256 });
      } else {
        const bytes = await readSmall(entry, name, limits.smallFileBytes);
        if (name.endsWith(".json")) checkStorableJson(name, bytes);
        out.small.set(name, bytes);
        if (store) written.add(key);
        const stored = store
          ? await store.put(key, bytes, {
            contentType: name.endsWith(".json") ? "application/json" : undefined,
          })
          : { bytes: bytes.byteLength, sha256: createHash("sha256").update(bytes).digest("hex") };
        out.files.push({ name, key, bytes: stored.bytes, sha256: stored.sha256 });
      }
    }
    layout.finish();
  } catch (e) {
    if (store) await Promise.all([...written].map((k) => store.delete(k).catch(() => {})));
    const cause = sourceError ?? e;
    if (
      cause instanceof PayloadTooLargeError || cause instanceof BadRequestError ||
      cause instanceof UnprocessableError
    ) throw cause;
    const why = cause instanceof Error ? cause.message : String(cause);
    // The body stream itself failed (the client went away mid-upload): not a malformed archive.
    const [message, code] = sourceError !== undefined
      ? [`must arrive whole: reading it failed after ${total} bytes (${why})`, "incomplete"]
      : [`must be a tar archive: ${why}`, "invalid_tar"];
    throw new BadRequestError(`Cannot read the upload as the request body ${message}`, {
      cause,
      errors: [{ path: "body", code, message }],
    });
  }
  if (total === 0) throw emptyUploadError();
  if (out.files.length === 0 && out.skippedCount === 0) {
    const message = "must be a tar archive holding the model folder's files: it holds none";
    throw new BadRequestError(`Cannot read the upload as the request body ${message}`, {
      errors: [{ path: "body", code: "empty", message }],
    });
  }
  out.sha256 = hash.digest("hex");
  return out;
}

/**
 * Holds a kept JSON file to the request bodies' limits (api/json_limits.ts). A file that does not
 * parse is left to the model check, which names what it needs of it.
 * @throws UnprocessableError at `{name}:{path in the document}` for a nesting past the depth limit,
 *   a U+0000 or a lone surrogate.
 */
function checkStorableJson(name: string, bytes: Uint8Array): void {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return;
  }
  const issue = jsonLimitIssue(value);
  if (!issue) return;
  const where = issue.path === "" ? "it" : issue.path;
  throw new UnprocessableError(`Cannot accept ${name} as ${where}: ${issue.message}`, {
    errors: [{ path: `${name}:${issue.path || "-"}`, code: issue.code, message: issue.message }],
  });
}

/** Hashes and counts chunks without storing them. */
async function drain(
  chunks: AsyncIterable<Uint8Array>,
): Promise<{ bytes: number; sha256: string }> {
  const h = createHash("sha256");
  let bytes = 0;
  for await (const c of chunks) {
    h.update(c);
    bytes += c.byteLength;
  }
  return { bytes, sha256: h.digest("hex") };
}

/** Buffers one small file, refusing it past `max` bytes. */
async function readSmall(
  entry: AsyncIterable<unknown>,
  name: string,
  max: number,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const chunk of entry) {
    n += (chunk as Uint8Array).byteLength;
    if (n > max) {
      throw new UnprocessableError(
        `Cannot accept ${name} as it must be at most ${max} bytes: it is larger`,
        {
          errors: [{ path: name, code: "too_big", message: `at most ${max} bytes` }],
        },
      );
    }
    parts.push(chunk as Uint8Array);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Keeps the first 8 + N bytes of a safetensors file (its length prefix and JSON header). */
class HeaderCapture {
  #buf = new Uint8Array(0);
  #need = 8;
  constructor(readonly file: string) {}

  push(chunk: Uint8Array): void {
    if (this.#buf.byteLength >= this.#need) return;
    const take = chunk.subarray(0, this.#need - this.#buf.byteLength);
    const next = new Uint8Array(this.#buf.byteLength + take.byteLength);
    next.set(this.#buf);
    next.set(take, this.#buf.byteLength);
    this.#buf = next;
    if (this.#need === 8 && this.#buf.byteLength === 8) {
      const n = Number(new DataView(this.#buf.buffer).getBigUint64(0, true));
      if (n > MAX_HEADER_BYTES) {
        throw this.#fail(
          `its header length must be at most ${MAX_HEADER_BYTES}: current value is ${n}`,
        );
      }
      this.#need = 8 + n;
      this.push(chunk.subarray(take.byteLength));
    }
  }

  /** The parsed header and the data section's size, given the file's total bytes. */
  result(fileBytes: number): { header: Record<string, unknown>; dataBytes: number } {
    if (this.#buf.byteLength < this.#need) {
      throw this.#fail("it must hold its whole header: the file is truncated");
    }
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder().decode(this.#buf.subarray(8)));
    } catch {
      throw this.#fail("its header must be JSON");
    }
    if (!header || typeof header !== "object" || Array.isArray(header)) {
      throw this.#fail("its header must be a JSON object");
    }
    return { header: header as Record<string, unknown>, dataBytes: fileBytes - this.#need };
  }

  #fail(why: string): UnprocessableError {
    return new UnprocessableError(`Cannot use ${this.file} as ${why}`, {
      errors: [{ path: `${this.file}:header`, code: "invalid_safetensors", message: why }],
    });
  }
}
