/**
 * A Hugging Face model folder as the tar stream `POST /v1/models` reads (`seed models upload DIR`):
 * the folder's top-level files under their plain names, streamed from disk one file at a time (a
 * multi-GB `model.safetensors` is never held in memory), with a callback counting the bytes as
 * the request pulls them.
 */
import { join } from "node:path";
import { pack as tarPack } from "tar-stream";
import { drainedOrClosed } from "../_streams.ts";

/** One file to send. */
export interface FolderFile {
  /** Name in the archive (the file's name in the folder). */
  name: string;
  /** Path on disk. */
  path: string;
  /** Size in bytes, as listed (a file that changes size while it is sent fails the upload). */
  bytes: number;
}

/** What {@link listModelFolder} found. */
export interface ModelFolder {
  files: FolderFile[];
  /** Entries not sent, each with why: `onnx/ (a folder)`, `pytorch_model.bin (not safetensors)`. */
  left: string[];
  /** Sum of `files[].bytes`. */
  bytes: number;
}

/**
 * Weights in formats the service does not read (it keeps `*.safetensors`): left out, as they can
 * be as large as the safetensors themselves.
 */
const OTHER_WEIGHTS = /\.(?:bin|pt|pth|ckpt|h5|msgpack|gguf|onnx|onnx_data|ot|tflite)$/;

/**
 * Lists the files of `dir` to upload: its top-level regular files (symbolic links followed, so
 * a Hugging Face cache snapshot folder works), sorted by name. Hidden files, subfolders (the
 * service reads one level) and weights in other formats are left out and listed in `left`.
 * @throws Error when `dir` is not a readable folder.
 */
export async function listModelFolder(dir: string): Promise<ModelFolder> {
  const info = await Deno.stat(dir).catch((e) => {
    throw new Error(`Cannot upload ${dir} as it must be a readable folder: ${e.message}`);
  });
  if (!info.isDirectory) {
    throw new Error(`Cannot upload ${dir} as it must be a folder: it is a file`);
  }
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  names.sort();
  const out: ModelFolder = { files: [], left: [], bytes: 0 };
  for (const name of names) {
    if (name.startsWith(".")) continue;
    const path = join(dir, name);
    const stat = await Deno.stat(path).catch(() => null);
    if (stat === null) out.left.push(`${name} (a broken link)`);
    else if (stat.isDirectory) out.left.push(`${name}/ (a folder)`);
    else if (!stat.isFile) out.left.push(`${name} (not a regular file)`);
    else if (OTHER_WEIGHTS.test(name)) out.left.push(`${name} (weights not in safetensors)`);
    else {
      out.files.push({ name, path, bytes: stat.size });
      out.bytes += stat.size;
    }
  }
  return out;
}

/**
 * The tar archive of `files` as a byte stream (ustar entries, mode 0644, mtime 0). `onBytes` is
 * called with the file and the bytes of it just handed to the archive; the consumer's
 * backpressure (the HTTP request) keeps that within a few chunks of what it has taken.
 */
export function folderTar(
  files: readonly FolderFile[],
  onBytes: (file: string, bytes: number) => void = () => {},
): ReadableStream<Uint8Array> {
  const pack = tarPack();
  const write = async () => {
    for (const f of files) {
      let done!: () => void;
      let failed!: (e: Error) => void;
      const written = new Promise<void>((res, rej) => [done, failed] = [res, rej]);
      const sink = pack.entry(
        { name: f.name, size: f.bytes, mode: 0o644, mtime: new Date(0), type: "file" },
        (err) => err ? failed(err) : done(),
      );
      sink.on("error", () => {}); // the pack's own error reaches the reader
      written.catch(() => {}); // observed below; a destroyed pack must not leak it
      const file = await Deno.open(f.path); // closed by its readable, at the end or on a throw
      for await (const chunk of file.readable) {
        if (!sink.write(chunk)) {
          await drainedOrClosed(sink);
          if ((sink as unknown as { destroying: boolean }).destroying) {
            throw new Error(`Cannot send ${f.name} as the archive was closed by its reader`);
          }
        }
        onBytes(f.name, chunk.byteLength);
      }
      (sink as unknown as { end(): void }).end();
      await written;
    }
    pack.finalize();
  };
  write().catch((e) => pack.destroy(e));
  return ReadableStream.from(pack as AsyncIterable<Uint8Array>);
}
