/**
 * Streams a tar archive of stored objects, verifying each object's SHA-256 as its bytes pass.
 *
 * The archive starts with `SHA256SUMS` (`sha256sum` format: `<hex>  <name>\n`, from the database
 * rows) so a client can check every extracted file; then one entry per object, read lazily, one
 * at a time. When an object's bytes do not hash to the recorded value (or have the wrong length)
 * the stream errors before the end-of-archive blocks, so the client sees a truncated archive
 * (an aborted response), never a silently corrupt one. The client side (extraction with the same
 * checks) is `api/client/extract.ts`.
 */
import { createHash } from "node:crypto";
import { type Pack, pack as tarPack } from "tar-stream";
import { drainedOrClosed } from "./_streams.ts";

/** One file to put in the archive. */
export interface TarSource {
  /** Path inside the archive (no leading slash), e.g. `step-40/model.safetensors`. */
  name: string;
  /** Exact size in bytes (written into the tar header before the data). */
  bytes: number;
  /** Expected lowercase hex SHA-256 of the contents. */
  sha256: string;
  /** Opens the object's bytes; called once, when this entry's turn comes. */
  open(): Promise<AsyncIterable<Uint8Array>>;
}

/** Thrown into the stream when an object's bytes do not match its recorded SHA-256 or size. */
export class ChecksumMismatchError extends Error {
  readonly objectName: string;
  constructor(objectName: string, what: string, expected: string, actual: string) {
    super(
      `Cannot stream ${objectName} as its ${what} must be ${expected}: current value is ${actual}`,
    );
    this.name = "ChecksumMismatchError";
    this.objectName = objectName;
  }
}

/** The `SHA256SUMS` listing for sources, in `sha256sum -c` format. */
export function sha256Sums(sources: readonly Pick<TarSource, "name" | "sha256">[]): string {
  return sources.map((s) => `${s.sha256}  ${s.name}\n`).join("");
}

/** Options of {@link tarStream}. */
export interface TarOptions {
  /**
   * Modification time of every entry (e.g. when the checkpoint was committed); default the Unix
   * epoch, which `tar -x` then sets on every extracted file.
   */
  mtime?: Date;
}

function waitEntry(pack: Pack, header: { name: string; size: number; mtime: Date }): {
  sink: ReturnType<Pack["entry"]>;
  done: Promise<void>;
} {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const sink = pack.entry(
    { ...header, mode: 0o644, type: "file" },
    (err) => err ? reject(err) : resolve(),
  );
  sink.on("error", () => {}); // the pack's own error reaches the reader
  done.catch(() => {}); // observed by the awaiting writer; a destroyed pack must not leak it
  return { sink, done };
}

async function writeSource(pack: Pack, source: TarSource, mtime: Date): Promise<void> {
  const { sink, done } = waitEntry(pack, { name: source.name, size: source.bytes, mtime });
  const hash = createHash("sha256");
  let seen = 0;
  for await (const chunk of await source.open()) {
    seen += chunk.byteLength;
    if (seen > source.bytes) break;
    hash.update(chunk);
    if (!sink.write(chunk)) {
      await drainedOrClosed(sink);
      // The reader went away (tarStream's cancel destroyed the pack): stop reading the object,
      // which leaving the loop closes. Waiting on "drain" alone never returned.
      if ((sink as unknown as { destroying: boolean }).destroying) return;
    }
  }
  if (seen !== source.bytes) {
    throw new ChecksumMismatchError(source.name, "size", `${source.bytes} bytes`, `${seen}+ bytes`);
  }
  const digest = hash.digest("hex");
  if (digest !== source.sha256) {
    throw new ChecksumMismatchError(source.name, "sha256", source.sha256, digest);
  }
  (sink as unknown as { end(): void }).end();
  await done;
}

/**
 * Returns a byte stream of the tar archive: `SHA256SUMS` then each source in order.
 * Cancelling the stream (client gone) stops reading objects. Errors: {@link ChecksumMismatchError}
 * or the source's own read error, surfaced as a stream error.
 */
export function tarStream(
  sources: readonly TarSource[],
  options: TarOptions = {},
): ReadableStream<Uint8Array> {
  const pack = tarPack();
  const mtime = options.mtime ?? new Date(0);
  let cancelled = false;
  const produce = async () => {
    const sums = new TextEncoder().encode(sha256Sums(sources));
    const first = waitEntry(pack, { name: "SHA256SUMS", size: sums.byteLength, mtime });
    first.sink.end(sums);
    await first.done;
    for (const source of sources) {
      if (cancelled) return;
      await writeSource(pack, source, mtime);
    }
    pack.finalize();
  };
  let failure: unknown;
  produce().catch((error) => {
    failure = error;
    pack.destroy(error);
  });
  const iterator = pack[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await iterator.next();
        if (done) controller.close();
        else controller.enqueue(new Uint8Array(value));
      } catch (error) {
        controller.error(failure ?? error); // the cause, not streamx's "Stream was destroyed"
      }
    },
    cancel() {
      cancelled = true;
      pack.destroy();
    },
  });
}
