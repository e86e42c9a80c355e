/**
 * A small Qwen3 model folder for upload tests: the tiny model of `deno task tiny-model`
 * (workers/model/tiny_qwen3.ts), and a tar archive writer.
 */
import { pack as tarPack } from "tar-stream";
import type { DecoderConfig } from "../../workers/model/config.ts";
import type { HfSaveOptions } from "../../workers/model/hf.ts";
import { TINY_QWEN3, tinyQwen3Files } from "../../workers/model/tiny_qwen3.ts";

/** The test model's config: the tiny model of `deno task tiny-model`. */
export const SMALL_QWEN3: DecoderConfig = TINY_QWEN3;

/** The folder's files (name → bytes), F16-free: F32 or BF16 weights, optionally sharded. */
export function smallQwen3Files(options: HfSaveOptions = {}): Map<string, Uint8Array> {
  return tinyQwen3Files(options);
}

/** A tar archive of `files` (each under `folder/` when given). */
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
