/**
 * Host-side KV cache for the decode graph. Per layer, keys and values live in buffers of shape
 * (B, Hkv, capacity, D) that are fed to onnxruntime without a copy (inputs are zero-copy, while
 * every output is copied out), so a decode step only writes its new tokens' keys and values
 * (`new.<l>.key|value`, (B, Hkv, T, D)) into the next free slots. Capacity grows in chunks;
 * unfilled slots are masked out by the caller's attention mask. All rows step together, so
 * every row has the same number of filled slots (`used`).
 */
import type * as ort from "onnxruntime-node";
import { tensor } from "../engine/mod.ts";
import type { DecoderConfig } from "./config.ts";

/** Slots added when the cache is full. */
const CHUNK = 32;

/** Keys and values of every layer for `rows` sequences. */
export class KvCache {
  /** Filled slots per row. */
  used = 0;
  /** Allocated slots per row. */
  capacity = 0;
  private keys: Float32Array[];
  private values: Float32Array[];
  private readonly heads: number;
  private readonly dim: number;

  constructor(readonly config: DecoderConfig, public rows: number) {
    this.heads = config.num_key_value_heads;
    this.dim = config.head_dim;
    this.keys = Array.from({ length: config.num_hidden_layers }, () => new Float32Array(0));
    this.values = Array.from({ length: config.num_hidden_layers }, () => new Float32Array(0));
  }

  /** `past.<l>.key|value` feeds, (rows, Hkv, capacity, D), viewing the buffers. */
  feeds(): Record<string, ort.Tensor> {
    const dims = [this.rows, this.heads, this.capacity, this.dim];
    const f: Record<string, ort.Tensor> = {};
    this.keys.forEach((k, l) => {
      f[`past.${l}.key`] = tensor("float32", k, dims);
      f[`past.${l}.value`] = tensor("float32", this.values[l], dims);
    });
    return f;
  }

  /** Write the step's `new.<l>.*` outputs, `t` tokens per row, into the next `t` slots. */
  append(outputs: ort.InferenceSession.ReturnType, t: number): void {
    if (this.used + t > this.capacity) this.resize(Math.ceil((this.used + t) / CHUNK) * CHUNK);
    const d = this.dim, cap = this.capacity;
    for (let l = 0; l < this.keys.length; l++) {
      for (const [buf, name] of [[this.keys[l], "key"], [this.values[l], "value"]] as const) {
        const src = outputs[`new.${l}.${name}`].data as Float32Array; // (rows, Hkv, t, D)
        for (let r = 0; r < this.rows * this.heads; r++) {
          buf.set(src.subarray(r * t * d, (r + 1) * t * d), (r * cap + this.used) * d);
        }
      }
    }
    this.used += t;
  }

  /** Keep only the rows at indices `keep` (ascending), in that order. */
  keepRows(keep: number[]): void {
    const rowSize = this.heads * this.capacity * this.dim;
    const pick = (buf: Float32Array) => {
      const next = new Float32Array(keep.length * rowSize);
      keep.forEach((src, dst) =>
        next.set(buf.subarray(src * rowSize, (src + 1) * rowSize), dst * rowSize)
      );
      return next;
    };
    this.keys = this.keys.map(pick);
    this.values = this.values.map(pick);
    this.rows = keep.length;
  }

  private resize(capacity: number): void {
    const d = this.dim, n = this.rows * this.heads, old = this.capacity;
    const grow = (buf: Float32Array) => {
      const next = new Float32Array(n * capacity * d);
      for (let r = 0; r < n; r++) {
        next.set(buf.subarray(r * old * d, r * old * d + this.used * d), r * capacity * d);
      }
      return next;
    };
    this.keys = this.keys.map(grow);
    this.values = this.values.map(grow);
    this.capacity = capacity;
  }
}
