/**
 * AdamW's per-element update as a WebAssembly SIMD kernel, bit-identical to the float64 JS loop it
 * replaces (`AdamW.step` before 2026-12-02):
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
 * Its memory holds one chunk of each of p, g, m and v; the kernel copies chunks in and out (the
 * arrays live in JS memory, which WebAssembly cannot address).
 */

/**
 * Elements per chunk: 4 arrays × 4,096 floats × 4 bytes = 64 KiB (one page), L2-resident. Chunks of
 * 2,048–8,192 ran within noise of each other in `bench/adamw.ts`.
 */
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

// Byte offsets of the four arrays in memory.
const P = 0, G = 4 * CHUNK, M = 8 * CHUNK, V = 12 * CHUNK;
// Locals: parameters n (i32), then b1, c1, b2, c2, stepSize, bc2Sqrt, eps, decay (f64); then
// i, end (i32), the splatted scalars (v128, 11–18), and g, m, v of the current pair (19–21).
const N = 0, I = 9, END_BYTE = 10, SPLAT = 11, Gv = 19, Mv = 20, Vv = 21;
const [B1, C1, B2, C2, STEP, BC2, EPS, DECAY] = [0, 1, 2, 3, 4, 5, 6, 7].map((k) => SPLAT + k);

/**
 * Body of `update(n, b1, c1, b2, c2, stepSize, bc2Sqrt, eps, decay)`: the first n elements of each
 * array in memory, in place; n a multiple of 2·PAIRS (c1 = 1 − b1, c2 = 1 − b2).
 */
function updateBody(): number[] {
  const code: number[] = [];
  const emit = (...ops: number[][]) => ops.forEach((op) => code.push(...op));
  for (let k = 0; k < 8; k++) emit(localGet(1 + k), F64X2_SPLAT, localSet(SPLAT + k));
  emit(localGet(N), i32Const(2), I32_SHL, localSet(END_BYTE)); // end = n·4 bytes
  emit(BLOCK, LOOP, localGet(I), localGet(END_BYTE), I32_GE_U, brIf(1));
  for (let pair = 0; pair < PAIRS; pair++) {
    const d = 8 * pair; // byte offset of this pair within the iteration
    emit(localGet(I), load64Zero(G + d), F64X2_PROMOTE_LOW_F32X4, localSet(Gv));
    // m ← f32(β1·m + c1·g); stored, then read back as float64 (exact)
    emit(
      localGet(I),
      localGet(B1),
      localGet(I),
      load64Zero(M + d),
      F64X2_PROMOTE_LOW_F32X4,
      F64X2_MUL,
    );
    emit(localGet(C1), localGet(Gv), F64X2_MUL, F64X2_ADD, F32X4_DEMOTE_F64X2_ZERO, localTee(Mv));
    emit(store64Lane0(M + d), localGet(Mv), F64X2_PROMOTE_LOW_F32X4, localSet(Mv));
    // v ← f32(β2·v + (c2·g)·g)
    emit(
      localGet(I),
      localGet(B2),
      localGet(I),
      load64Zero(V + d),
      F64X2_PROMOTE_LOW_F32X4,
      F64X2_MUL,
    );
    emit(localGet(C2), localGet(Gv), F64X2_MUL, localGet(Gv), F64X2_MUL, F64X2_ADD);
    emit(F32X4_DEMOTE_F64X2_ZERO, localTee(Vv), store64Lane0(V + d));
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

/** The module's bytes: one memory (exported as `memory`) and the function `update`. */
export function adamwModuleBytes(): Uint8Array<ArrayBuffer> {
  const pages = Math.ceil((16 * CHUNK) / 65536);
  const text = (s: string) => vec([...s].map((c) => [c.charCodeAt(0)]));
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
    ...section(1, vec([[0x60, ...vec([[I32], ...Array(8).fill([F64])]), ...vec([])]])), // type
    ...section(3, vec([[0]])), // function 0 has type 0
    ...section(5, vec([[0x00, ...u32(pages)]])), // memory: min pages, no max
    ...section(7, vec([[...text("update"), 0x00, 0], [...text("memory"), 0x02, 0]])), // exports
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

/** One tensor's update in place: weights p, gradient g, moments m and v (all the same length). */
export type AdamWKernel = (
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  k: AdamWScalars,
) => void;

/** The compiled module, shared by every kernel instance (each has its own memory). */
let compiled: WebAssembly.Module | undefined;

/**
 * An instance of the kernel with its own 64 KiB memory (synchronous compile: the module is a few
 * hundred bytes). Lengths are not checked here: the caller passes arrays of one length.
 * @throws {WebAssembly.CompileError} where the runtime lacks WebAssembly SIMD.
 */
export function wasmAdamWKernel(): AdamWKernel {
  compiled ??= new WebAssembly.Module(adamwModuleBytes());
  const instance = new WebAssembly.Instance(compiled);
  const update = instance.exports.update as (n: number, ...scalars: number[]) => void;
  const buffer = (instance.exports.memory as WebAssembly.Memory).buffer; // never grows
  const [wp, wg, wm, wv] = [P, G, M, V].map((at) => new Float32Array(buffer, at, CHUNK));
  return (p, g, m, v, k) => {
    const c1 = 1 - k.b1, c2 = 1 - k.b2;
    for (let at = 0; at < p.length; at += CHUNK) {
      const n = Math.min(CHUNK, p.length - at), end = at + n;
      wp.set(p.subarray(at, end));
      wg.set(g.subarray(at, end));
      wm.set(m.subarray(at, end));
      wv.set(v.subarray(at, end));
      // The tail of a short chunk is padded with zeros (v = 0 gives √0 + ε > 0: no NaN) and not
      // copied back.
      const padded = Math.ceil(n / (2 * PAIRS)) * 2 * PAIRS;
      for (const w of [wp, wg, wm, wv]) w.fill(0, n, padded);
      update(padded, k.b1, c1, k.b2, c2, k.stepSize, k.bc2Sqrt, k.eps, k.decay);
      p.set(wp.subarray(0, n), at);
      m.set(wm.subarray(0, n), at);
      v.set(wv.subarray(0, n), at);
    }
  };
}
