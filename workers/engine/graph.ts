/**
 * The graph builder: typed values with static or symbolic shapes, ONNX primitives that check
 * shapes and dtypes when they are called (so a wrong graph fails at build time with a message
 * naming the op and the shapes), and a tape of differentiable primitives for `gradients()`
 * (autodiff.ts). Plumbing, constants and non-differentiable ops are in _graph_core.ts;
 * composite layers (RMSNorm, SiLU, linear, …) in nn.ts.
 */
import { FLOATS, GraphCore, Value } from "./_graph_core.ts";
import { type Dim, intAttr, intsAttr, stringAttr } from "./onnx_proto.ts";
import { broadcastShapes, formatShape, isStatic, normAxis, numel, sameShape } from "./shape.ts";

export { type TapeEntry, Value } from "./_graph_core.ts";

/** An ONNX graph under construction, with differentiable primitives. */
export class Graph extends GraphCore {
  // ------------------------------------------------------------------ elementwise primitives

  /** `a + b` with broadcasting. */
  add(a: Value, b: Value): Value {
    return this.binary("Add", a, b);
  }
  /** `a − b` with broadcasting. */
  sub(a: Value, b: Value): Value {
    return this.binary("Sub", a, b);
  }
  /** `a · b` elementwise with broadcasting. */
  mul(a: Value, b: Value): Value {
    return this.binary("Mul", a, b);
  }
  /** `a / b` elementwise with broadcasting. */
  div(a: Value, b: Value): Value {
    return this.binary("Div", a, b);
  }
  /** `−x`. */
  neg(x: Value): Value {
    return this.unary("Neg", x);
  }
  /** `eˣ`. */
  exp(x: Value): Value {
    return this.unary("Exp", x);
  }
  /** Natural log. */
  log(x: Value): Value {
    return this.unary("Log", x);
  }
  /** `√x`. */
  sqrt(x: Value): Value {
    return this.unary("Sqrt", x);
  }
  /** `1/x`. */
  reciprocal(x: Value): Value {
    return this.unary("Reciprocal", x);
  }
  /** `σ(x) = 1/(1+e⁻ˣ)`. */
  sigmoid(x: Value): Value {
    return this.unary("Sigmoid", x);
  }
  /** `tanh x`. */
  tanh(x: Value): Value {
    return this.unary("Tanh", x);
  }
  /** `xᵖ` for a constant exponent `p`. */
  pow(x: Value, p: number): Value {
    if (!FLOATS.includes(x.dtype)) {
      this.fail("Pow", `input must be float: current dtype is ${x.dtype}`);
    }
    const [y] = this.emit("Pow", [x, this.scalar(p, x.dtype)], [x]);
    return this.record("Pow", [x], [y], { p });
  }
  /** Gauss error function (onnxruntime has no float64 kernel for it). */
  erf(x: Value): Value {
    return this.unary("Erf", x);
  }
  /** Identity (a differentiable copy). */
  identity(x: Value): Value {
    return this.unary("Identity", x);
  }
  /** `cond ? a : b` elementwise with broadcasting; `cond` is bool. */
  where(cond: Value, a: Value, b: Value): Value {
    if (cond.dtype !== "bool") {
      this.fail("Where", `cond must be bool: current dtype is ${cond.dtype}`);
    }
    this.sameDType("Where", a, b);
    const shape = broadcastShapes("Where", cond.shape, broadcastShapes("Where", a.shape, b.shape));
    const [y] = this.emit("Where", [cond, a, b], [{ shape, dtype: a.dtype }]);
    return this.record("Where", [cond, a, b], [y]);
  }

  // ------------------------------------------------------------------ linear algebra

  /** Batched matrix product `a @ b` (rank ≥ 2 each; leading dims broadcast). */
  matmul(a: Value, b: Value): Value {
    this.sameDType("MatMul", a, b);
    if (a.rank < 2 || b.rank < 2) {
      this.fail(
        "MatMul",
        `operands must have rank ≥ 2: current shapes are ${formatShape(a.shape)} and ${
          formatShape(b.shape)
        }`,
      );
    }
    if (a.shape.at(-1) !== b.shape.at(-2)) {
      this.fail(
        "MatMul",
        `inner dims must match: current shapes are ${formatShape(a.shape)} and ${
          formatShape(b.shape)
        }`,
      );
    }
    const batch = broadcastShapes("MatMul", a.shape.slice(0, -2), b.shape.slice(0, -2));
    const [y] = this.emit("MatMul", [a, b], [{
      shape: [...batch, a.shape.at(-2)!, b.shape.at(-1)!],
      dtype: a.dtype,
    }]);
    return this.record("MatMul", [a, b], [y]);
  }

  /**
   * `op(a) @ op(b) (+ c)` on matrices, with `op` a transpose when `transA`/`transB` is set
   * (ONNX Gemm, alpha = beta = 1). `c` broadcasts to the (M, N) result.
   */
  gemm(a: Value, b: Value, opts: { transA?: boolean; transB?: boolean; c?: Value } = {}): Value {
    this.sameDType("Gemm", a, b);
    if (a.rank !== 2 || b.rank !== 2) {
      this.fail(
        "Gemm",
        `operands must be matrices: current shapes are ${formatShape(a.shape)} and ${
          formatShape(b.shape)
        }`,
      );
    }
    const [m, k] = opts.transA ? [a.shape[1], a.shape[0]] : a.shape;
    const [k2, n] = opts.transB ? [b.shape[1], b.shape[0]] : b.shape;
    if (k !== k2) {
      this.fail(
        "Gemm",
        `inner dims must match: current shapes are ${formatShape(a.shape)}${
          opts.transA ? "ᵀ" : ""
        } and ${formatShape(b.shape)}${opts.transB ? "ᵀ" : ""}`,
      );
    }
    if (opts.c) broadcastShapes("Gemm", [m, n], opts.c.shape);
    const attrs = [intAttr("transA", opts.transA ? 1 : 0), intAttr("transB", opts.transB ? 1 : 0)];
    const ins = opts.c ? [a, b, opts.c] : [a, b];
    const [y] = this.emit("Gemm", ins, [{ shape: [m, n], dtype: a.dtype }], attrs);
    return this.record("Gemm", ins, [y], { transA: !!opts.transA, transB: !!opts.transB });
  }

  // ------------------------------------------------------------------ shape primitives

  /**
   * Reshape to `shape`. A symbolic dim equal to the input's dim at the same index is copied
   * (ONNX 0); at most one other symbolic dim is inferred (ONNX −1).
   */
  reshape(x: Value, shape: readonly Dim[]): Value {
    const spec: number[] = [];
    let inferred = 0;
    shape.forEach((d, i) => {
      if (typeof d === "number") spec.push(d);
      else if (x.shape[i] === d) spec.push(0);
      else {
        spec.push(-1);
        inferred++;
      }
    });
    if (inferred > 1) {
      this.fail(
        "Reshape",
        `at most one new symbolic dim can be inferred: target is ${formatShape(shape)} from ${
          formatShape(x.shape)
        }`,
      );
    }
    const nx = numel(x.shape), ny = numel(shape);
    if (nx !== null && ny !== null && nx !== ny) {
      this.fail(
        "Reshape",
        `element counts must match: ${formatShape(x.shape)} has ${nx}, ${
          formatShape(shape)
        } has ${ny}`,
      );
    }
    const [y] = this.emit("Reshape", [x, this.ints(spec)], [{ shape, dtype: x.dtype }]);
    return this.record("Reshape", [x], [y]);
  }
  /** Permute dims. */
  transpose(x: Value, perm: number[]): Value {
    if (perm.length !== x.rank || [...perm].sort().some((p, i) => p !== i)) {
      this.fail(
        "Transpose",
        `perm must be a permutation of 0..${x.rank - 1}: current perm is [${perm}]`,
      );
    }
    const [y] = this.emit("Transpose", [x], [{
      shape: perm.map((p) => x.shape[p]),
      dtype: x.dtype,
    }], [intsAttr("perm", perm)]);
    return this.record("Transpose", [x], [y], { perm });
  }
  /** Broadcast `x` to `shape`. */
  expand(x: Value, shape: readonly Dim[], shapeTensor?: Value): Value {
    const out = broadcastShapes("Expand", x.shape, shape);
    if (!sameShape(out, shape)) {
      this.fail("Expand", `${formatShape(x.shape)} must broadcast to ${formatShape(shape)}`);
    }
    const st = shapeTensor ?? (isStatic(shape) ? this.ints(shape) : undefined);
    if (!st) this.fail("Expand", `a symbolic target ${formatShape(shape)} needs its shape tensor`);
    const [y] = this.emit("Expand", [x, st!], [{ shape, dtype: x.dtype }]);
    return this.record("Expand", [x], [y]);
  }
  /** Split along `axis` into pieces of the given static sizes. */
  split(x: Value, axis: number, sizes: number[]): Value[] {
    const ax = normAxis("Split", axis, x.rank);
    const total = sizes.reduce((a, b) => a + b, 0);
    if (x.shape[ax] !== total) {
      this.fail("Split", `sizes [${sizes}] must sum to dim ${ax} of ${formatShape(x.shape)}`);
    }
    const outs = sizes.map((s) => ({
      shape: x.shape.map((d, i) => (i === ax ? s : d)),
      dtype: x.dtype,
    }));
    const ys = this.emit("Split", [x, this.ints(sizes)], outs, [intAttr("axis", ax)]);
    this.record("Split", [x], ys, { axis: ax, sizes });
    return ys;
  }
  /** Concatenate along `axis`; other dims must match. */
  concat(xs: Value[], axis: number): Value {
    const ax = normAxis("Concat", axis, xs[0].rank);
    for (const x of xs) {
      this.sameDType("Concat", xs[0], x);
      if (x.rank !== xs[0].rank || x.shape.some((d, i) => i !== ax && d !== xs[0].shape[i])) {
        this.fail(
          "Concat",
          `dims other than ${ax} must match: ${xs.map((v) => formatShape(v.shape)).join(", ")}`,
        );
      }
    }
    const dims = xs.map((x) => x.shape[ax]);
    const cat: Dim = dims.every((d) => typeof d === "number")
      ? (dims as number[]).reduce((a, b) => a + b, 0)
      : dims.filter((d) => d !== 0).join("+");
    const [y] = this.emit("Concat", xs, [{
      shape: xs[0].shape.map((d, i) => (i === ax ? cat : d)),
      dtype: xs[0].dtype,
    }], [intAttr("axis", ax)]);
    return this.record("Concat", xs, [y], { axis: ax });
  }

  // ------------------------------------------------------------------ reductions, softmax

  /** Sum over `axes` (keepdims by default). */
  reduceSum(x: Value, axes: number[], keepDims = true): Value {
    return this.reduce("ReduceSum", x, axes, keepDims);
  }
  /** Mean over `axes` (keepdims by default). */
  reduceMean(x: Value, axes: number[], keepDims = true): Value {
    return this.reduce("ReduceMean", x, axes, keepDims);
  }
  /**
   * Softmax over `axis`. Kept as a primitive (not Exp/ReduceSum/Div) because onnxruntime's
   * fused kernel is faster and max-subtracting; its rule is two lines.
   */
  softmax(x: Value, axis = -1): Value {
    return this.softmaxLike("Softmax", x, axis);
  }
  /** Log-softmax over `axis` (primitive for the same reason as `softmax`). */
  logSoftmax(x: Value, axis = -1): Value {
    return this.softmaxLike("LogSoftmax", x, axis);
  }

  // ------------------------------------------------------------------ indexing

  /** Rows of `table` (V, …) at int64 `ids` → (…ids, …). */
  gather(table: Value, ids: Value): Value {
    if (ids.dtype !== "int64") {
      this.fail("Gather", `ids must be int64: current dtype is ${ids.dtype}`);
    }
    const shape = [...ids.shape, ...table.shape.slice(1)];
    const [y] = this.emit("Gather", [table, ids], [{ shape, dtype: table.dtype }], [
      intAttr("axis", 0),
    ]);
    return this.record("Gather", [table, ids], [y]);
  }
  /** `y[i…] = x[…, idx[i…], …]` along `axis` (ONNX GatherElements); `idx` int64, same rank. */
  gatherElements(x: Value, idx: Value, axis: number): Value {
    const ax = normAxis("GatherElements", axis, x.rank);
    if (idx.dtype !== "int64" || idx.rank !== x.rank) {
      this.fail(
        "GatherElements",
        `idx must be int64 of rank ${x.rank}: current is ${idx.dtype} ${formatShape(idx.shape)}`,
      );
    }
    const [y] = this.emit("GatherElements", [x, idx], [{ shape: idx.shape, dtype: x.dtype }], [
      intAttr("axis", ax),
    ]);
    return this.record("GatherElements", [x, idx], [y], { axis: ax });
  }
  /** `ScatterElements(data, idx, updates, reduction="add")` along `axis`; not differentiated. */
  scatterAdd(data: Value, idx: Value, updates: Value, axis: number): Value {
    return this.emit("ScatterElements", [data, idx, updates], [data], [
      intAttr("axis", axis),
      stringAttr("reduction", "add"),
    ])[0];
  }

  // ------------------------------------------------------------------ composites

  /**
   * Record `output`, computed from `inputs` by primitives under `withoutTape()`, as one
   * differentiable op `op` whose backward rule (autodiff.ts `RULES[op]`) reads `info` (forward
   * values the rule reuses). For composites whose hand-derived gradient takes fewer passes over
   * the data than the chain of their primitives' rules (nn.ts `rmsNorm`, `silu`); the forward
   * nodes are the same either way.
   */
  composite(op: string, inputs: Value[], output: Value, info: Record<string, unknown>): Value {
    return this.record(op, inputs, [output], info);
  }

  // ------------------------------------------------------------------ internals

  private binary(op: string, a: Value, b: Value): Value {
    this.sameDType(op, a, b);
    const [y] = this.emit(op, [a, b], [{
      shape: broadcastShapes(op, a.shape, b.shape),
      dtype: a.dtype,
    }]);
    return this.record(op, [a, b], [y]);
  }
  private unary(op: string, x: Value): Value {
    if (op !== "Identity" && !FLOATS.includes(x.dtype)) {
      this.fail(op, `input must be float: current dtype is ${x.dtype}`);
    }
    const [y] = this.emit(op, [x], [x]);
    return this.record(op, [x], [y]);
  }
  private reduce(
    op: "ReduceSum" | "ReduceMean",
    x: Value,
    axes: number[],
    keepDims: boolean,
  ): Value {
    const ax = axes.map((a) => normAxis(op, a, x.rank));
    const shape = keepDims
      ? x.shape.map((d, i) => (ax.includes(i) ? 1 : d))
      : x.shape.filter((_, i) => !ax.includes(i));
    const [y] = this.emit(op, [x, this.ints(ax)], [{ shape, dtype: x.dtype }], [
      intAttr("keepdims", keepDims ? 1 : 0),
    ]);
    return this.record(op, [x], [y], { axes: ax, keepDims });
  }
  private softmaxLike(op: "Softmax" | "LogSoftmax", x: Value, axis: number): Value {
    const ax = normAxis(op, axis, x.rank);
    const [y] = this.emit(op, [x], [x], [intAttr("axis", ax)]);
    return this.record(op, [x], [y], { axis: ax });
  }
}
