/**
 * Host-side KV cache for the decode graph. Per layer, keys and values live in buffers of shape
 * (B, Hkv, capacity, D) that are fed to onnxruntime without a copy (inputs are zero-copy, while
 * every output is copied out), so a decode step only writes its new tokens' keys and values
 * (`new.<l>.key|value`, (B, Hkv, T, D)) into the next free slots. Capacity grows in chunks;
 * unfilled slots are masked out by the caller's attention mask. All rows step together, so
 * every row has the same number of filled slots (`used`).
 *
 * Continuous batching (workers/serve/engine.ts) also needs to put rows of different caches into
 * one and to forget slots no row attends to any more: {@link KvCache.gather} does both in one copy.
 * Keys are cached after RoPE, so a row's keys may move to other slots: attention depends only on
 * the attention mask, never on a slot's index.
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

  /** Bytes its key and value buffers hold (float32, all rows and allocated slots). */
  get bytes(): number {
    return [...this.keys, ...this.values].reduce((n, b) => n + b.byteLength, 0);
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

  /**
   * Moves each row's oldest `count` slots `offsets[r]` slots later, over the empty slots that
   * follow them, and zeroes the slots they leave: a row filled as [shared prefix, empty slots,
   * own tokens] becomes [empty slots, shared prefix, own tokens], whose filled slots are
   * contiguous and newest (the layout the decode engine's attention masks assume). Keys hold
   * RoPE already, so moving them changes nothing they compute.
   * @throws {RangeError} when an offset is negative or moves slots past `used`.
   */
  shiftOldest(offsets: readonly number[], count: number): void {
    const d = this.dim, cap = this.capacity;
    offsets.forEach((o, r) => {
      if (!(Number.isInteger(o) && o >= 0 && o + count <= this.used)) {
        throw new RangeError(
          `Cannot shift KV cache slots as an offset must be in [0, ${
            this.used - count
          }]: current value is ${o}`,
        );
      }
      if (o === 0) return;
      for (const buf of [...this.keys, ...this.values]) {
        for (let h = 0; h < this.heads; h++) {
          const base = (r * this.heads + h) * cap * d; // (row, head) block of (cap, D)
          buf.copyWithin(base + o * d, base, base + count * d);
          buf.fill(0, base, base + o * d);
        }
      }
    });
  }

  /**
   * A new cache with this one's rows and only their oldest `count` slots (a prefix kept for
   * later prompts that share only part of it).
   * @throws {RangeError} when `count` is not an integer in [0, used].
   */
  oldest(count: number): KvCache {
    if (!(Number.isInteger(count) && count >= 0 && count <= this.used)) {
      throw new RangeError(
        `Cannot take the oldest KV cache slots as count must be in [0, ${this.used}]: current value is ${count}`,
      );
    }
    const out = new KvCache(this.config, this.rows);
    const d = this.dim, cap = Math.max(CHUNK, Math.ceil(count / CHUNK) * CHUNK);
    const take = (buf: Float32Array) => {
      const next = new Float32Array(this.rows * this.heads * cap * d);
      for (let r = 0; r < this.rows * this.heads; r++) {
        next.set(buf.subarray(r * this.capacity * d, (r * this.capacity + count) * d), r * cap * d);
      }
      return next;
    };
    out.keys = this.keys.map(take);
    out.values = this.values.map(take);
    out.used = count;
    out.capacity = cap;
    return out;
  }

  /** Keep only the rows at indices `keep`, in that order (a row may be kept more than once). */
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

  /**
   * A new cache of the given rows of `parts` (in order; a row may repeat), aligned at their newest
   * slot and without the `drop` oldest slots: its `used` is U = max(u) − drop, where a part's u
   * is its `end` (default its `used`: a part may end early, e.g. at the end of a kept prompt
   * prefix), and a row of a part keeps its slots [u − min(u, U), u) as the newest slots of its
   * new row; when u < U its first U − u slots are empty. The caller re-aligns each row's
   * attention mask the same way: the empty and the dropped slots must be masked (0).
   * @throws {RangeError} when `parts` is empty, configs differ, a row index is out of range, an
   *   `end` is not an integer in [0, used], or `drop` is not an integer in [0, max(u)].
   */
  static gather(
    parts: { cache: KvCache; rows: readonly number[]; end?: number }[],
    drop = 0,
  ): KvCache {
    if (parts.length === 0) {
      throw new RangeError("Cannot gather KV cache rows as parts must be given");
    }
    const config = parts[0].cache.config;
    const ends = parts.map((p) => p.end ?? p.cache.used);
    parts.forEach((p, i) => {
      if (!(Number.isInteger(ends[i]) && ends[i] >= 0 && ends[i] <= p.cache.used)) {
        throw new RangeError(
          `Cannot gather KV cache rows as a part's end must be an integer in [0, ${p.cache.used}]: current value is ${
            ends[i]
          }`,
        );
      }
    });
    const most = Math.max(...ends);
    if (!Number.isInteger(drop) || drop < 0 || drop > most) {
      throw new RangeError(
        `Cannot gather KV cache rows as drop must be an integer in [0, ${most}]: current value is ${drop}`,
      );
    }
    const out = new KvCache(config, parts.reduce((n, p) => n + p.rows.length, 0));
    const used = most - drop, capacity = Math.max(CHUNK, Math.ceil(used / CHUNK) * CHUNK);
    const d = out.dim, heads = out.heads;
    out.keys = out.keys.map(() => new Float32Array(out.rows * heads * capacity * d));
    out.values = out.values.map(() => new Float32Array(out.rows * heads * capacity * d));
    out.used = used;
    out.capacity = capacity;
    let dst = 0;
    for (const [i, { cache, rows }] of parts.entries()) {
      if (cache.heads !== heads || cache.dim !== d || cache.keys.length !== out.keys.length) {
        throw new RangeError("Cannot gather KV cache rows as every part must have one config");
      }
      const keep = Math.min(ends[i], used); // newest slots kept per row
      const from = ends[i] - keep, to = used - keep; // first kept source slot, its new slot
      for (const src of rows) {
        if (!Number.isInteger(src) || src < 0 || src >= cache.rows) {
          throw new RangeError(
            `Cannot gather KV cache rows as a row index must be in [0, ${cache.rows}): current value is ${src}`,
          );
        }
        for (let l = 0; l < out.keys.length; l++) {
          for (const [a, b] of [[cache.keys[l], out.keys[l]], [cache.values[l], out.values[l]]]) {
            for (let h = 0; h < heads; h++) {
              const s = ((src * heads + h) * cache.capacity + from) * d;
              b.set(a.subarray(s, s + keep * d), ((dst * heads + h) * capacity + to) * d);
            }
          }
        }
        dst++;
      }
    }
    return out;
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
