/**
 * A small Qwen3 model folder for upload tests: the tiny model of `deno task tiny-model`
 * (workers/model/tiny_qwen3.ts); archive it with tests/_harness/tar.ts.
 */
import type { DecoderConfig } from "../../workers/model/config.ts";
import type { HfSaveOptions } from "../../workers/model/hf.ts";
import { TINY_QWEN3, tinyQwen3Files } from "../../workers/model/tiny_qwen3.ts";

/** The test model's config: the tiny model of `deno task tiny-model`. */
export const SMALL_QWEN3: DecoderConfig = TINY_QWEN3;

/** The folder's files (name → bytes), F16-free: F32 or BF16 weights, optionally sharded. */
export function smallQwen3Files(options: HfSaveOptions = {}): Map<string, Uint8Array> {
  return tinyQwen3Files(options);
}
