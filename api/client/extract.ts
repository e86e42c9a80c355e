/**
 * Extracts a checkpoint archive answered by `GET /v1/jobs/{id}/checkpoints/{step}/archive` (made by
 * `tarStream` in `api/tar.ts`: `SHA256SUMS` first, then one entry per file), hashing each file as it
 * is written and checking it against `SHA256SUMS`. Used by the CLI's `download` and the demo.
 */
import { createHash } from "node:crypto";
import { mkdir, open } from "node:fs/promises";
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
 * Extracts an archive made by `tarStream` (api/tar.ts) into `outDir`, hashing each file as it is
 * written and checking it against the archive's `SHA256SUMS`; also checks that every listed
 * file arrived. Rejects names with `..` or a leading `/`. Throws {@link ArchiveError}.
 */
export async function extractVerified(
  body: ReadableStream<Uint8Array>,
  outDir: string,
): Promise<ExtractedFile[]> {
  const ex = extract();
  let bodyError: unknown;
  const feed = (async () => {
    try {
      for await (const chunk of body) {
        if (!ex.write(chunk)) await new Promise<void>((r) => ex.once("drain", () => r()));
      }
      (ex as unknown as { end(): void }).end();
    } catch (error) {
      bodyError = error;
      ex.destroy(error as Error);
    }
  })();
  try {
    return await extractEntries(ex, outDir, feed);
  } catch (error) {
    throw bodyError ?? error; // the stream's own cause, not streamx's "Stream was destroyed"
  }
}

async function extractEntries(
  ex: ReturnType<typeof extract>,
  outDir: string,
  feed: Promise<void>,
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
      continue;
    }
    if (!expected) {
      throw new ArchiveError("Cannot verify the archive as SHA256SUMS must come first");
    }
    const path = join(outDir, name);
    await mkdir(dirname(path), { recursive: true });
    const handle = await open(path, "w");
    const hash = createHash("sha256");
    let bytes = 0;
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
    const sha256 = hash.digest("hex");
    if (expected.get(name) !== sha256) {
      throw new ArchiveError(
        `Cannot accept ${name} as its sha256 must be ${
          expected.get(name)
        }: current value is ${sha256}`,
      );
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
