/**
 * Extracts a checkpoint archive answered by `GET /v1/jobs/{id}/checkpoints/{step}/archive` (made by
 * `tarStream` in `api/tar.ts`: `SHA256SUMS` first, then one entry per file), hashing each file as
 * it is written and checking it against `SHA256SUMS`. A file already at the destination is not
 * written over unless the caller says so. Used by the CLI's `download` and the demo.
 */
import { createHash } from "node:crypto";
import type { Stats } from "node:fs";
import { type FileHandle, lstat, mkdir, open, rm, stat, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { extract } from "tar-stream";

/** One file written by {@link extractVerified}. */
export interface ExtractedFile {
  /** Path inside the archive. */
  name: string;
  /** Absolute or relative path on disk (outDir joined with name). */
  path: string;
  bytes: number;
  sha256: string;
}

/** Thrown by {@link extractVerified} for an unsafe name, a missing `SHA256SUMS` or a mismatch. */
export class ArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArchiveError";
  }
}

/**
 * Thrown by {@link extractVerified} when files of the archive are already at the destination and
 * `overwrite` was not given; nothing was written.
 */
export class DestinationExistsError extends Error {
  /** The paths on disk (outDir joined with the archive's names) that exist, in archive order. */
  readonly paths: string[];
  constructor(outDir: string, paths: string[]) {
    super(
      paths.length === 1
        ? `Cannot extract the archive into ${outDir} as ${paths[0]} already exists`
        : `Cannot extract the archive into ${outDir} as ${paths[0]} and ${
          paths.length - 1
        } more of its files already exist`,
    );
    this.name = "DestinationExistsError";
    this.paths = paths;
  }
}

/**
 * Thrown by {@link extractVerified} when something at the destination is of the wrong kind: a file
 * where the archive needs a folder (outDir itself, or a folder of a file's path), or a folder, FIFO,
 * socket or device where it writes a file (with `overwrite`). Nothing was written to that path.
 */
export class DestinationKindError extends Error {
  /** The path on disk that is in the way. */
  readonly path: string;
  /** What is wrong with it: `PATH must be a folder: it is a file`. */
  readonly reason: string;
  /**
   * @param is what is at `path` ({@link kindOf}'s words; default: a file where a folder is needed,
   *   a folder where a file is).
   */
  constructor(outDir: string, path: string, needs: "folder" | "file", is?: string) {
    const reason = `${path} must be a ${needs}: it is ${
      is ?? (needs === "folder" ? "a file" : "a folder")
    }`;
    super(`Cannot extract the archive into ${outDir} as ${reason}`);
    this.name = "DestinationKindError";
    this.path = path;
    this.reason = reason;
  }
}

/** Options of {@link extractVerified}. */
export interface ExtractOptions {
  /**
   * Replace files and links already at the destination with new files, a link's target left as it
   * was (default false: refuse before writing any).
   */
  overwrite?: boolean;
}

/**
 * Extracts an archive made by `tarStream` (api/tar.ts) into `outDir`, hashing each file as it is
 * written and checking it against the archive's `SHA256SUMS`; also checks that every listed
 * file arrived. Rejects names with `..` or a leading `/`. Without `overwrite`, a file listed in
 * `SHA256SUMS` that already exists under `outDir` (as a file, folder or link, even a broken one)
 * stops it before anything is written, and a file created there meanwhile is not replaced either.
 * With `overwrite`, a file or link there is removed and a new file written in its place: a link is
 * not followed, so the file it points at (maybe outside `outDir`) is left as it was. The body is
 * cancelled on any error; the file being written when it comes (cut short, or failing its hash) is
 * removed, and the files checked before it stay.
 * @throws ArchiveError for an unsafe name, a missing `SHA256SUMS` or a hash mismatch;
 *   DestinationExistsError for files already there; DestinationKindError for a file where a folder
 *   is needed (outDir included) or a folder where a file goes; the body's or the file system's
 *   error.
 */
export async function extractVerified(
  body: ReadableStream<Uint8Array>,
  outDir: string,
  options: ExtractOptions = {},
): Promise<ExtractedFile[]> {
  const ex = extract();
  const reader = body.getReader();
  let bodyError: unknown;
  const feed = (async () => {
    try {
      // `destroying`: destroy() was called (its "close" may already have been emitted).
      while (!ex.destroying) {
        const { done, value } = await reader.read();
        if (done || ex.destroying) break;
        if (!ex.write(value) && !ex.destroying) await drainOrClose(ex);
      }
      if (!ex.destroying) (ex as unknown as { end(): void }).end();
    } catch (error) {
      bodyError = error;
      ex.destroy(error as Error);
    }
  })();
  try {
    return await extractEntries(ex, outDir, feed, options.overwrite === true);
  } catch (error) {
    // The rest of the body is not waited for: cancelling ends a read in flight.
    ex.destroy();
    await reader.cancel().catch(() => {});
    await feed;
    throw bodyError ?? error; // the stream's own cause, not streamx's "Stream was destroyed"
  }
}

/**
 * Resolves once `ex` drains or closes, and removes the listener of the other: a listener left
 * behind at each wait piles up over a large archive (Node's MaxListenersExceededWarning on stderr).
 */
function drainOrClose(ex: ReturnType<typeof extract>): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      ex.off("drain", done);
      ex.off("close", done);
      resolve();
    };
    ex.on("drain", done);
    ex.on("close", done);
  });
}

/**
 * Whether anything (a file, folder or link, even a broken one) is at `path`, a file of the archive
 * under `outDir`.
 * @throws DestinationKindError when a folder of its path is a file; the file system's error.
 */
async function exists(outDir: string, path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ENOENT") return false;
    if (code === "ENOTDIR") await throwIfFileInPath(outDir, path);
    throw error;
  }
}

/**
 * Throws {@link DestinationKindError} naming the nearest folder of `path` (the file's own folder
 * first, up to the root) that exists as something other than a folder (links followed); returns
 * when there is none, the caller's error then stands.
 */
async function throwIfFileInPath(outDir: string, path: string): Promise<void> {
  for (let dir = dirname(path); dir !== dirname(dir); dir = dirname(dir)) {
    let isFolder: boolean;
    try {
      isFolder = (await stat(dir)).isDirectory();
    } catch {
      continue; // missing, or itself under a file: look further up
    }
    if (isFolder) return;
    throw new DestinationKindError(outDir, dir, "folder");
  }
}

/**
 * What the file system entry `info` (an `lstat`) is, in words, when it is neither a file nor a
 * link, the only kinds `overwrite` removes: "a folder", "a FIFO", "a socket", "a device"; null for
 * a file or a link.
 */
export function kindOf(info: Stats): string | null {
  if (info.isFile() || info.isSymbolicLink()) return null;
  if (info.isDirectory()) return "a folder";
  if (info.isFIFO()) return "a FIFO";
  if (info.isSocket()) return "a socket";
  return "a device";
}

/**
 * Creates the file `path` of the archive for writing, never through a link there: the open is
 * exclusive ("wx", O_EXCL), which refuses anything at `path`, a link included (even a broken one),
 * so a file that appeared since the check of `SHA256SUMS` is not replaced either. With `overwrite`,
 * the file or link there is removed and the open tried once more: a link is replaced by a file and
 * what it points at is left as it was (as `cp --remove-destination`). Anything else there (a
 * folder, a FIFO, a socket, a device such as `/dev/null`) is not removed: a FIFO or device is
 * rarely a stale download, and removing one as root would break every user of it.
 * @throws DestinationExistsError when something is there and `overwrite` is not set;
 *   DestinationKindError for a folder, FIFO, socket or device there; the file system's error
 *   (EEXIST when something is made at `path` again between the removal and the open).
 */
async function openNew(outDir: string, path: string, overwrite: boolean): Promise<FileHandle> {
  try {
    return await open(path, "wx");
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "EISDIR") throw new DestinationKindError(outDir, path, "file");
    if (code !== "EEXIST") throw error;
    if (!overwrite) throw new DestinationExistsError(outDir, [path]);
  }
  const kind = await lstat(path).then(kindOf, () => null);
  if (kind !== null) throw new DestinationKindError(outDir, path, "file", kind);
  await unlink(path).catch((error) => {
    if ((error as { code?: string }).code !== "ENOENT") throw error;
  });
  return await open(path, "wx");
}

async function extractEntries(
  ex: ReturnType<typeof extract>,
  outDir: string,
  feed: Promise<void>,
  overwrite: boolean,
): Promise<ExtractedFile[]> {
  let expected: Map<string, string> | undefined;
  const files: ExtractedFile[] = [];
  for await (const entry of ex) {
    const name = entry.header.name;
    if (name.startsWith("/") || name.split("/").includes("..")) {
      throw new ArchiveError(`Cannot extract ${name} as archive names must be relative`);
    }
    if (name === "SHA256SUMS") {
      let text = "";
      const decoder = new TextDecoder();
      for await (const chunk of entry) {
        text += decoder.decode(chunk as Uint8Array, { stream: true });
      }
      expected = new Map(
        text.split("\n").filter((l) => l.trim()).map((l) => {
          const m = l.match(/^([0-9a-f]{64}) {2}(.+)$/);
          if (!m) throw new ArchiveError(`Cannot read SHA256SUMS line: ${l}`);
          return [m[2], m[1]] as [string, string];
        }),
      );
      if (!overwrite) {
        const there: string[] = [];
        for (const listed of expected.keys()) {
          const path = join(outDir, listed);
          if (await exists(outDir, path)) there.push(path);
        }
        if (there.length > 0) throw new DestinationExistsError(outDir, there);
      }
      continue;
    }
    if (!expected) {
      throw new ArchiveError("Cannot verify the archive as SHA256SUMS must come first");
    }
    const path = join(outDir, name);
    await mkdir(dirname(path), { recursive: true }).catch(async (error) => {
      const code = (error as { code?: string }).code;
      if (code === "EEXIST" || code === "ENOTDIR") await throwIfFileInPath(outDir, path);
      throw error;
    });
    const handle = await openNew(outDir, path, overwrite);
    const hash = createHash("sha256");
    let bytes = 0;
    let sha256: string;
    try {
      try {
        for await (const raw of entry) {
          const chunk = raw as Uint8Array;
          hash.update(chunk);
          bytes += chunk.byteLength;
          await handle.write(chunk);
        }
      } finally {
        await handle.close();
      }
      sha256 = hash.digest("hex");
      if (expected.get(name) !== sha256) {
        throw new ArchiveError(
          `Cannot accept ${name} as its sha256 must be ${
            expected.get(name)
          }: current value is ${sha256}`,
        );
      }
    } catch (error) {
      // A file cut short (the body failed) or failing its check is not left under its name, where
      // it would pass for the checkpoint's file; this call made it.
      await rm(path, { force: true });
      throw error;
    }
    files.push({ name, path, bytes, sha256 });
  }
  await feed;
  if (!expected) throw new ArchiveError("Cannot verify the archive as it has no SHA256SUMS");
  const missing = [...expected.keys()].filter((n) => !files.some((f) => f.name === n));
  if (missing.length > 0) {
    throw new ArchiveError(`Cannot accept the archive as it lacks ${missing.join(", ")}`);
  }
  return files;
}
