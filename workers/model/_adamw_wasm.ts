/**
 * AdamW's per-element update as a WebAssembly SIMD kernel, bit-identical to the float64 JS loop
 * (`updateInJs` in optim.ts, which optim_test.ts checks it against):
 *   m ← f32(β1·m + (1 − β1)·g),   v ← f32(β2·v + (1 − β2)·g·g)
 *   p ← f32(p·decay − stepSize·m / (√v / bc2Sqrt + ε))
 * with every operation in float64 (`f64x2`, two elements per instruction) and each store rounded to
 * float32 to nearest, as a `Float32Array` store rounds. WebAssembly's float operations are IEEE 754
 * with round-to-nearest and never fused (no FMA), so the results equal the JS loop's bit for bit
 * (NaN payloads aside). Two divisions and a square root per element are the loop's costliest
 * operations (scalar in JS); two lanes per instruction halve their count.
 *
 * The module is written here as bytes (no WebAssembly toolchain on these machines), through a few
 * named opcode helpers; `tests/workers/model/optim_test.ts` checks it against the JS loop.
 * The moments m and v live in WebAssembly memory for the optimizer's lifetime (`WasmMoments`);
 * p and g live in JS memory, which WebAssembly cannot address, so they pass through a scratch area
 * one chunk at a time (p copied in and back, g in).
 */

/** Elements per chunk of p and g copied through scratch memory (2 × 16 KiB, L1/L2-resident). */
export const CHUNK = 4096;
/** Element pairs per loop iteration (unrolled: two independent pairs in flight). */
const PAIRS = 2;

/** Unsigned LEB128 (WebAssembly's integer encoding). */
function u32(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}
/** A length-prefixed vector of already-encoded items. */
const vec = (items: number[][]): number[] => [...u32(items.length), ...items.flat()];
/** A section: id, byte size, contents. */
const section = (id: number, bytes: number[]): number[] => [id, ...u32(bytes.length), ...bytes];

const I32 = 0x7f, F64 = 0x7c, V128 = 0x7b;
// Core instructions (WebAssembly 2.0 §5.4).
const localGet = (i: number) => [0x20, ...u32(i)];
const localSet = (i: number) => [0x21, ...u32(i)];
const localTee = (i: number) => [0x22, ...u32(i)];
const i32Const = (n: number) => [0x41, ...u32(n)]; // non-negative n < 2^6 only (signed LEB128)
const I32_SHL = [0x74], I32_ADD = [0x6a], I32_GE_U = [0x4f];
const BLOCK = [0x02, 0x40], LOOP = [0x03, 0x40], END = [0x0b];
const brIf = (depth: number) => [0x0d, ...u32(depth)];
const br = (depth: number) => [0x0c, ...u32(depth)];
// SIMD instructions: prefix 0xfd, then the opcode as LEB128 (fixed-width SIMD proposal, phase 5).
const simd = (op: number, ...imm: number[]) => [0xfd, ...u32(op), ...imm];
/** v128.load64_zero: two float32 at `base + offset` into the low lanes (align 2^3). */
const load64Zero = (offset: number) => simd(0x5d, 3, ...u32(offset));
/** v128.store64_lane lane 0: the low two float32 to `base + offset`. */
const store64Lane0 = (offset: number) => simd(0x5b, 3, ...u32(offset), 0);
const F64X2_SPLAT = simd(0x14);
const F32X4_DEMOTE_F64X2_ZERO = simd(0x5e), F64X2_PROMOTE_LOW_F32X4 = simd(0x5f);
const F64X2_SQRT = simd(0xef), F64X2_ADD = simd(0xf0), F64X2_SUB = simd(0xf1);
const F64X2_MUL = simd(0xf2), F64X2_DIV = simd(0xf3);

// Byte offsets of the scratch chunks of p and g; the moments follow them.
const P = 0, G = 4 * CHUNK, MOMENTS = 8 * CHUNK;
// Locals: parameters n, mBase, vBase (i32), then b1, c1, b2, c2, stepSize, bc2Sqrt, eps, decay
// (f64); then i, end (i32), the splatted scalars (v128, 13–20), and g, m, v of a pair (21–23).
const N = 0, M_BASE = 1, V_BASE = 2, I = 11, END_BYTE = 12, SPLAT = 13, Gv = 21, Mv = 22, Vv = 23;
const [B1, C1, B2, C2, STEP, BC2, EPS, DECAY] = [0, 1, 2, 3, 4, 5, 6, 7].map((k) => SPLAT + k);
/** The address base + i (bytes). */
const at = (base: number) => [...localGet(base), ...localGet(I), ...I32_ADD];

/**
 * Body of `update(n, mBase, vBase, b1, c1, b2, c2, stepSize, bc2Sqrt, eps, decay)`: n elements in
 * place, p and g from the scratch chunks, m and v from byte addresses mBase and vBase; n a multiple
 * of 2·PAIRS (c1 = 1 − b1, c2 = 1 − b2).
 */
function updateBody(): number[] {
  const code: number[] = [];
  const emit = (...ops: number[][]) => ops.forEach((op) => code.push(...op));
  for (let k = 0; k < 8; k++) emit(localGet(3 + k), F64X2_SPLAT, localSet(SPLAT + k));
  emit(localGet(N), i32Const(2), I32_SHL, localSet(END_BYTE)); // end = n·4 bytes
  emit(BLOCK, LOOP, localGet(I), localGet(END_BYTE), I32_GE_U, brIf(1));
  for (let pair = 0; pair < PAIRS; pair++) {
    const d = 8 * pair; // byte offset of this pair within the iteration
    emit(localGet(I), load64Zero(G + d), F64X2_PROMOTE_LOW_F32X4, localSet(Gv));
    // m ← f32(β1·m + c1·g); stored, then read back as float64 (exact)
    emit(at(M_BASE), localGet(B1), at(M_BASE), load64Zero(d), F64X2_PROMOTE_LOW_F32X4, F64X2_MUL);
    emit(localGet(C1), localGet(Gv), F64X2_MUL, F64X2_ADD, F32X4_DEMOTE_F64X2_ZERO, localTee(Mv));
    emit(store64Lane0(d), localGet(Mv), F64X2_PROMOTE_LOW_F32X4, localSet(Mv));
    // v ← f32(β2·v + (c2·g)·g)
    emit(at(V_BASE), localGet(B2), at(V_BASE), load64Zero(d), F64X2_PROMOTE_LOW_F32X4, F64X2_MUL);
    emit(localGet(C2), localGet(Gv), F64X2_MUL, localGet(Gv), F64X2_MUL, F64X2_ADD);
    emit(F32X4_DEMOTE_F64X2_ZERO, localTee(Vv), store64Lane0(d));
    emit(localGet(Vv), F64X2_PROMOTE_LOW_F32X4, localSet(Vv));
    // p ← f32(p·decay − (stepSize·m) / (√v / bc2Sqrt + ε))
    emit(localGet(I), localGet(I), load64Zero(P + d), F64X2_PROMOTE_LOW_F32X4, localGet(DECAY));
    emit(F64X2_MUL, localGet(STEP), localGet(Mv), F64X2_MUL);
    emit(localGet(Vv), F64X2_SQRT, localGet(BC2), F64X2_DIV, localGet(EPS), F64X2_ADD, F64X2_DIV);
    emit(F64X2_SUB, F32X4_DEMOTE_F64X2_ZERO, store64Lane0(P + d));
  }
  emit(localGet(I), i32Const(8 * PAIRS), I32_ADD, localSet(I), br(0), END, END, END);
  const locals = vec([[2, I32], [11, V128]]);
  return [...u32(locals.length + code.length), ...locals, ...code];
}

/** The module's bytes: the function `update`, over a memory imported as `env.memory`. */
export function adamwModuleBytes(): Uint8Array<ArrayBuffer> {
  const text = (s: string) => vec([...s].map((c) => [c.charCodeAt(0)]));
  const params = [[I32], [I32], [I32], ...Array(8).fill([F64])];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
    ...section(1, vec([[0x60, ...vec(params), ...vec([])]])), // type 0: params → no results
    ...section(2, vec([[...text("env"), ...text("memory"), 0x02, 0x00, 1]])), // memory, ≥ 1 page
    ...section(3, vec([[0]])), // function 0 has type 0
    ...section(7, vec([[...text("update"), 0x00, 0]])), // export it
    ...section(10, vec([updateBody()])), // code
  ]);
}

/** Per-step scalars of the update, float64. */
export interface AdamWScalars {
  b1: number;
  b2: number;
  eps: number;
  /** lr / (1 − β1^t). */
  stepSize: number;
  /** √(1 − β2^t). */
  bc2Sqrt: number;
  /** 1 − lr·λ for decayed tensors, 1 otherwise. */
  decay: number;
}

/** Most bytes of moments one WebAssembly memory holds (a larger tensor gets a memory alone). */
const GROUP_BYTES = 2 ** 30;
/** WebAssembly (wasm32) memories are at most 65,536 pages of 64 KiB. */
const MAX_PAGES = 65536;
/** Elements of the largest tensor whose moments fit one memory (beside the scratch chunks). */
export const MAX_TENSOR_ELEMENTS = Math.floor((MAX_PAGES * 65536 - MOMENTS) / 8 / 4) * 4;

/** The compiled module, shared by every instance (each has its own memory). */
let compiled: WebAssembly.Module | undefined;

/** Elements rounded up to whole iterations of the kernel (2·PAIRS). */
const padded = (n: number) => Math.ceil(n / (2 * PAIRS)) * 2 * PAIRS;

/**
 * AdamW's moments m and v (float32, zero at start) for tensors of the given sizes, held in
 * WebAssembly memory, and the kernel that updates them with a tensor's weights and gradient.
 * Tensors are packed in order into memories of ≤ 1 GiB of moments each (`groupBytes`); memories
 * never grow, so the views from `expAvg`/`expAvgSq` stay valid for the object's lifetime.
 */
export class WasmMoments {
  readonly sizes: readonly number[];
  #tensors: {
    update: (...args: number[]) => void;
    /** Scratch chunks of p and g. */
    p: Float32Array;
    g: Float32Array;
    /** Byte addresses of m and v in that memory. */
    mBase: number;
    vBase: number;
    m: Float32Array;
    v: Float32Array;
  }[] = [];

  /**
   * @param sizes elements per tensor (the update's `k` indexes them).
   * @param options.groupBytes most bytes of moments per memory (default 1 GiB; smaller in tests).
   * @throws {RangeError} when a size exceeds `MAX_TENSOR_ELEMENTS` or is not an integer ≥ 0.
   */
  constructor(sizes: readonly number[], options: { groupBytes?: number } = {}) {
    const groupBytes = options.groupBytes ?? GROUP_BYTES;
    this.sizes = sizes;
    for (const n of sizes) {
      if (!Number.isInteger(n) || n < 0 || n > MAX_TENSOR_ELEMENTS) {
        throw new RangeError(
          `Cannot hold AdamW moments in WebAssembly memory as a tensor must have 0–${MAX_TENSOR_ELEMENTS} elements: current value is ${n}`,
        );
      }
    }
    compiled ??= new WebAssembly.Module(adamwModuleBytes());
    for (let first = 0; first < sizes.length;) {
      let bytes = 8 * padded(sizes[first]), last = first + 1;
      while (last < sizes.length && bytes + 8 * padded(sizes[last]) <= groupBytes) {
        bytes += 8 * padded(sizes[last++]);
      }
      this.#group(sizes.slice(first, last), bytes);
      first = last;
    }
  }

  /** One memory for `sizes` (their m regions, then their v regions) and its kernel instance. */
  #group(sizes: number[], bytes: number): void {
    const memory = new WebAssembly.Memory({ initial: Math.ceil((MOMENTS + bytes) / 65536) });
    const instance = new WebAssembly.Instance(compiled!, { env: { memory } });
    const update = instance.exports.update as (...args: number[]) => void;
    const buffer = memory.buffer;
    const p = new Float32Array(buffer, P, CHUNK), g = new Float32Array(buffer, G, CHUNK);
    let mBase = MOMENTS, vBase = MOMENTS + bytes / 2;
    for (const n of sizes) {
      const m = new Float32Array(buffer, mBase, n), v = new Float32Array(buffer, vBase, n);
      this.#tensors.push({ update, p, g, mBase, vBase, m, v });
      mBase += 4 * padded(n);
      vBase += 4 * padded(n);
    }
  }

  /** Tensor k's first moment m: a live view into WebAssembly memory, `sizes[k]` floats. */
  expAvg(k: number): Float32Array {
    return this.#tensors[k].m;
  }

  /** Tensor k's second moment v: a live view into WebAssembly memory, `sizes[k]` floats. */
  expAvgSq(k: number): Float32Array {
    return this.#tensors[k].v;
  }

  /**
   * One update of tensor k in place: weights `p` and gradient `g` (both `sizes[k]` floats; not
   * checked here) with its moments.
   */
  update(k: number, p: Float32Array, g: Float32Array, s: AdamWScalars): void {
    const t = this.#tensors[k];
    const c1 = 1 - s.b1, c2 = 1 - s.b2;
    for (let at = 0; at < p.length; at += CHUNK) {
      const n = Math.min(CHUNK, p.length - at), end = at + n, n4 = padded(n);
      t.p.set(p.subarray(at, end));
      t.g.set(g.subarray(at, end));
      // A short last chunk is padded with zeros: the moments' padding lanes stay 0 (m = v = 0,
      // √0 + ε > 0: no NaN), and p's padding lanes are not copied back.
      t.p.fill(0, n, n4);
      t.g.fill(0, n, n4);
      const [mAt, vAt] = [t.mBase + 4 * at, t.vBase + 4 * at];
      t.update(n4, mAt, vAt, s.b1, c1, s.b2, c2, s.stepSize, s.bc2Sqrt, s.eps, s.decay);
      p.set(t.p.subarray(0, n), at);
    }
  }
}
