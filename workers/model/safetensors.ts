/**
 * The safetensors file format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
 * header length N, N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]},
 * __metadata__?: {string: string}}` (padded with spaces to a multiple of 8), then the raw
 * little-endian tensor bytes; offsets are relative to the end of the header.
 *
 * Reads F32, F16 and BF16 into Float32Array; writes F32 (bit-exact) or BF16 (round to nearest
 * even). Also reads the sharded layout (`model.safetensors.index.json`, a `weight_map` from tensor
 * name to shard file).
 */
import { z } from "zod";

/** Element types this module reads (`F32`, `F16`, `BF16`) and writes (`F32`, `BF16`). */
export type SafetensorsDtype = "F32" | "F16" | "BF16";

/** One tensor in memory: row-major float32 values and a shape. */
export interface Tensor {
  shape: number[];
  data: Float32Array;
}

/** A parsed safetensors file: tensors in header order, their stored dtypes, and metadata. */
export interface SafetensorsFile {
  tensors: Map<string, Tensor>;
  dtypes: Map<string, SafetensorsDtype>;
  metadata: Record<string, string>;
}

/** Thrown when bytes are not a valid (or not a supported) safetensors file or index. */
export class SafetensorsError extends Error {
  override name = "SafetensorsError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
if (!littleEndian) {
  throw new SafetensorsError("Cannot use safetensors as the host must be little-endian");
}

const BYTES: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** Largest header accepted (the reference implementation's limit is 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

const entrySchema = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});
const metadataSchema = z.record(z.string(), z.string());

/** Number of elements of a shape (1 for a scalar `[]`). */
export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Parses a safetensors file and converts every tensor to float32.
 * @throws {SafetensorsError} on a truncated file, malformed header, overlapping or out-of-range
 *   offsets, a byte length that does not match the shape, or a dtype other than F32/F16/BF16.
 */
export function readSafetensors(bytes: Uint8Array): SafetensorsFile {
  if (bytes.length < 8) {
    throw new SafetensorsError(
      `Cannot read safetensors as the file must hold at least 8 bytes: current length is ${bytes.length}`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerBytes = Number(view.getBigUint64(0, true));
  if (headerBytes > MAX_HEADER_BYTES || 8 + headerBytes > bytes.length) {
    throw new SafetensorsError(
      `Cannot read safetensors as the header length must fit the file (${bytes.length} bytes): current value is ${headerBytes}`,
    );
  }
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerBytes)));
  } catch (cause) {
    throw new SafetensorsError("Cannot read safetensors as the header must be JSON", { cause });
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new SafetensorsError("Cannot read safetensors as the header must be a JSON object");
  }
  const dataStart = 8 + headerBytes;
  const dataBytes = bytes.length - dataStart;
  const out: SafetensorsFile = { tensors: new Map(), dtypes: new Map(), metadata: {} };
  const spans: [number, number, string][] = [];
  for (const [name, raw] of Object.entries(header)) {
    if (name === "__metadata__") {
      const meta = metadataSchema.safeParse(raw);
      if (!meta.success) {
        throw new SafetensorsError(
          "Cannot read safetensors as __metadata__ must map strings to strings",
        );
      }
      out.metadata = meta.data;
      continue;
    }
    const entry = entrySchema.safeParse(raw);
    if (!entry.success) {
      throw new SafetensorsError(
        `Cannot read tensor ${name} as its header entry must be {dtype, shape, data_offsets}: current value is ${
          JSON.stringify(raw)
        }`,
      );
    }
    const { dtype, shape, data_offsets: [begin, end] } = entry.data;
    if (!(dtype in BYTES)) {
      throw new SafetensorsError(
        `Cannot read tensor ${name} as its dtype must be F32, F16 or BF16: current value is ${dtype}`,
      );
    }
    const d = dtype as SafetensorsDtype;
    const n = elementCount(shape);
    if (end < begin || end > dataBytes || end - begin !== n * BYTES[d]) {
      throw new SafetensorsError(
        `Cannot read tensor ${name} as data_offsets must span ${
          n * BYTES[d]
        } bytes inside ${dataBytes}: current value is [${begin}, ${end}]`,
      );
    }
    spans.push([begin, end, name]);
    out.tensors.set(name, {
      shape,
      data: decode(bytes.subarray(dataStart + begin, dataStart + end), d),
    });
    out.dtypes.set(name, d);
  }
  spans.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) {
    if (spans[i][0] < spans[i - 1][1]) {
      throw new SafetensorsError(
        `Cannot read safetensors as tensors must not overlap: ${spans[i - 1][2]} and ${
          spans[i][2]
        } do`,
      );
    }
  }
  return out;
}

/** float32 value of every binary16 bit pattern, built on first F16 read. */
let f16Table: Float32Array | null = null;

/** Raw little-endian bytes of one tensor → float32 values. */
function decode(raw: Uint8Array, dtype: SafetensorsDtype): Float32Array {
  if (dtype === "F32") return new Float32Array(raw.slice().buffer); // copy: aligned, bit-exact
  const halves = new Uint16Array(raw.slice().buffer);
  const out = new Float32Array(halves.length);
  if (dtype === "BF16") {
    const bits = new Uint32Array(out.buffer);
    // bf16 is the top half of f32
    for (let i = 0; i < halves.length; i++) bits[i] = halves[i] << 16;
  } else {
    f16Table ??= Float32Array.from({ length: 65536 }, (_, h) => f16ToF32(h)); // 256 KiB, built once
    for (let i = 0; i < halves.length; i++) out[i] = f16Table[halves[i]];
  }
  return out;
}

/** IEEE 754 binary16 bits → number (exact; handles subnormals, infinities and NaN). */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/**
 * float32 values → bfloat16 bits, rounding to nearest even (as `torch.Tensor.to(torch.bfloat16)`);
 * NaN stays a (quiet) NaN.
 */
export function f32ToBf16Bits(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i];
    if ((x & 0x7fffffff) > 0x7f800000) {
      out[i] = (x >>> 16) | 0x40; // NaN: keep sign, force a quiet-NaN mantissa bit
    } else {
      out[i] = ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
    }
  }
  return out;
}

/** Options of `writeSafetensors`. */
export interface SafetensorsWriteOptions {
  /** Stored element type: `F32` (default, bit-exact) or `BF16` (round to nearest even). */
  dtype?: "F32" | "BF16";
  /** String metadata stored under `__metadata__` (e.g. `{format: "pt"}`). */
  metadata?: Record<string, string>;
}

/**
 * Serialises tensors (in map order) into one safetensors file.
 * @throws {SafetensorsError} when a tensor's data length does not match its shape, or a name is
 *   `__metadata__`.
 */
export function writeSafetensors(
  tensors: Map<string, Tensor>,
  options: SafetensorsWriteOptions = {},
): Uint8Array {
  const dtype = options.dtype ?? "F32";
  const width = BYTES[dtype];
  const header: Record<string, unknown> = {};
  if (options.metadata) header.__metadata__ = options.metadata;
  let offset = 0;
  for (const [name, t] of tensors) {
    if (name === "__metadata__") {
      throw new SafetensorsError("Cannot write a tensor as its name must not be __metadata__");
    }
    const n = elementCount(t.shape);
    if (t.data.length !== n) {
      throw new SafetensorsError(
        `Cannot write tensor ${name} as its data must hold ${n} values for shape [${t.shape}]: current length is ${t.data.length}`,
      );
    }
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + n * width] };
    offset += n * width;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    // trailing spaces, as the reference writer pads
    const spaced = new Uint8Array(padded).fill(0x20);
    spaced.set(json);
    json = spaced;
  }
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const t of tensors.values()) {
    const raw = dtype === "F32" ? t.data : f32ToBf16Bits(t.data);
    out.set(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength), at);
    at += raw.byteLength;
  }
  return out;
}

const indexSchema = z.object({
  metadata: z.record(z.string(), z.unknown()).optional(),
  weight_map: z.record(z.string(), z.string()),
});

/** The `model.safetensors.index.json` of a sharded checkpoint. */
export type ShardIndex = z.infer<typeof indexSchema>;

/**
 * Parses a `model.safetensors.index.json`.
 * @throws {SafetensorsError} when it is not JSON or lacks a `weight_map` of strings, or a shard
 *   name leaves the directory (contains `/` or `..`).
 */
export function parseShardIndex(bytes: Uint8Array): ShardIndex {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(bytes));
  } catch (cause) {
    throw new SafetensorsError("Cannot read the shard index as it must be JSON", { cause });
  }
  const parsed = indexSchema.safeParse(raw);
  if (!parsed.success) {
    throw new SafetensorsError(
      `Cannot read the shard index as it must hold weight_map: ${parsed.error.message}`,
    );
  }
  for (const file of Object.values(parsed.data.weight_map)) {
    if (file.includes("/") || file.includes("\\") || file.includes("..")) {
      throw new SafetensorsError(
        `Cannot read the shard index as shard names must be plain file names: current value is ${file}`,
      );
    }
  }
  return parsed.data;
}

/**
 * Reads every shard named by an index (each shard file once) and merges their tensors; only
 * tensors listed in `weight_map` are kept.
 * @param readFile returns a shard's bytes, or null when it is missing.
 * @throws {SafetensorsError} when a shard is missing or lacks a tensor the index puts in it.
 */
export async function readShardedSafetensors(
  index: ShardIndex,
  readFile: (name: string) => Promise<Uint8Array | null>,
): Promise<SafetensorsFile> {
  const out: SafetensorsFile = { tensors: new Map(), dtypes: new Map(), metadata: {} };
  const byFile = new Map<string, string[]>();
  for (const [tensor, file] of Object.entries(index.weight_map)) {
    byFile.set(file, [...(byFile.get(file) ?? []), tensor]);
  }
  for (const [file, names] of byFile) {
    const bytes = await readFile(file);
    if (bytes === null) {
      throw new SafetensorsError(`Cannot read shard ${file} as it must exist: it is missing`);
    }
    const shard = readSafetensors(bytes);
    Object.assign(out.metadata, shard.metadata);
    for (const name of names) {
      const t = shard.tensors.get(name);
      if (!t) {
        throw new SafetensorsError(
          `Cannot read tensor ${name} as shard ${file} must hold it: it does not`,
        );
      }
      out.tensors.set(name, t);
      out.dtypes.set(name, shard.dtypes.get(name)!);
    }
  }
  return out;
}

/**
 * Index of the first NaN or ±Infinity in `data`, or -1 when every element is finite. Weights
 * holding one load, then make every logit NaN (each request a server error), so loaders refuse
 * them.
 */
export function firstNonFinite(data: Float32Array): number {
  for (let i = 0; i < data.length; i++) {
    // x - x is 0 for finite x, NaN for NaN and ±Infinity.
    if (data[i] - data[i] !== 0) return i;
  }
  return -1;
}
