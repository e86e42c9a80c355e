/** A tar archive writer for upload tests and benchmarks (a Hugging Face folder as one stream). */
import { pack as tarPack } from "tar-stream";

/**
 * A tar archive of `files` (name → bytes), each under `folder` (e.g. `"model/"`; empty: top level).
 * @returns the whole archive in memory.
 */
export async function tarOf(files: Map<string, Uint8Array>, folder = ""): Promise<Uint8Array> {
  const p = tarPack();
  for (const [name, bytes] of files) {
    p.entry({ name: `${folder}${name}`, size: bytes.byteLength }, bytes);
  }
  p.finalize();
  const chunks: Uint8Array[] = [];
  for await (const c of p) chunks.push(c as Uint8Array);
  const out = new Uint8Array(chunks.reduce((s, c) => s + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
