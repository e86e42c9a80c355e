/**
 * The graph builder: typed values with static or symbolic shapes, ONNX primitives that check
 * shapes and dtypes when they are called (so a wrong graph fails at build time with a message
 * naming the op and the shapes), and a tape of differentiable primitives for `gradients()`
 * (autodiff.ts). Composite layers (RMSNorm, SiLU, linear, …) live in nn.ts.
 */
import {
  type Attribute,
  type Dim,
  type DType,
  encodeModel,
  intAttr,
  intsAttr,
  type NodeObject,
  OPSET,
  stringAttr,
  tensorAttr,
  type TensorData,
  tensorProto,
  valueInfo,
} from "./onnx_proto.ts";
import {
  broadcastShapes,
  formatShape,
  GraphBuildError,
  isStatic,
  normAxis,
  numel,
  sameShape,
} from "./shape.ts";

/** A tensor in the graph: its ONNX name, shape (static or symbolic dims) and element type. */
export class Value {
  constructor(
    readonly name: string,
    readonly shape: readonly Dim[],
    readonly dtype: DType,
    /** Set when the value depends on an input that `gradients()` may differentiate. */
    public requiresGrad = false,
  ) {}
  /** Rank (number of dims). */
  get rank(): number {
    return this.shape.length;
  }
}

/** One differentiable primitive application, replayed backwards by `gradients()`. */
export interface TapeEntry {
  op: string;
  inputs: Value[];
  outputs: Value[];
  /** Op parameters the backward rule needs (axis, perm, transA, …). */
  info: Record<string, unknown>;
}

const FLOATS: DType[] = ["float32", "float64"];

/** An ONNX graph under construction. */
export class Graph {
  readonly nodes: NodeObject[] = [];
  readonly inputs: Record<string, unknown>[] = [];
  readonly outputs: Record<string, unknown>[] = [];
  readonly tape: TapeEntry[] = [];
  private readonly names = new Set<string>();
  private readonly consts = new Map<string, Value>();
  private counter = 0;
  private recording = true;

  /** `floatType` is the dtype of scalars made by `scalar()` and of float inputs by default. */
  constructor(readonly name: string, readonly floatType: DType = "float32") {}

  // ------------------------------------------------------------------ leaves and plumbing

  /** A graph input. Parameters pass `requiresGrad: true`. */
  input(
    name: string,
    shape: readonly Dim[],
    opts: { dtype?: DType; requiresGrad?: boolean } = {},
  ): Value {
    this.claim(name);
    const dtype = opts.dtype ?? this.floatType;
    this.inputs.push(valueInfo(name, dtype, shape));
    return new Value(name, [...shape], dtype, opts.requiresGrad ?? false);
  }

  /** Mark `v` as graph output `name` (an Identity node renames it). */
  output(v: Value, name: string): void {
    this.claim(name);
    this.nodes.push(node("Identity", `n${this.counter++}`, [v.name], [name], []));
    this.outputs.push(valueInfo(name, v.dtype, v.shape));
  }

  /**
   * Emit one ONNX node with declared output shapes; no tape entry. Primitives below call this;
   * call it directly only for ops that are never differentiated.
   */
  emit(
    op: string,
    inputs: (Value | "")[],
    outs: { shape: readonly Dim[]; dtype: DType }[],
    attrs: Attribute[] = [],
  ): Value[] {
    const values = outs.map((o) => new Value(this.fresh(op), [...o.shape], o.dtype));
    const ins = inputs.map((v) => (v === "" ? "" : v.name));
    this.nodes.push(node(op, `n${this.counter++}`, ins, values.map((v) => v.name), attrs));
    return values;
  }

  /** Run `fn` without recording tape entries (backward passes, stop-gradient regions). */
  withoutTape<T>(fn: () => T): T {
    const was = this.recording;
    this.recording = false;
    try {
      return fn();
    } finally {
      this.recording = was;
    }
  }

  /** Serialised ONNX model of this graph. */
  toModel(opset = OPSET): Uint8Array {
    return encodeModel(
      { name: this.name, node: this.nodes, input: this.inputs, output: this.outputs },
      opset,
    );
  }

  // ------------------------------------------------------------------ constants

  /** A constant tensor (cached by content when small). */
  constant(data: TensorData, shape: number[], dtype: DType): Value {
    const key = data.length <= 64
      ? `${dtype}:${shape}:${Array.from(data as ArrayLike<unknown>)}`
      : "";
    const hit = key ? this.consts.get(key) : undefined;
    if (hit) return hit;
    const t = tensorProto(data, shape, dtype);
    const [v] = this.emit("Constant", [], [{ shape, dtype }], [tensorAttr("value", t)]);
    if (key) this.consts.set(key, v);
    return v;
  }
  /** A float scalar of `dtype` (default: the graph's float type). */
  scalar(c: number, dtype: DType = this.floatType): Value {
    return this.constant(floatArray(dtype, [c]), [], dtype);
  }
  /** A float tensor from numbers. */
  floats(values: ArrayLike<number>, shape: number[], dtype: DType = this.floatType): Value {
    return this.constant(floatArray(dtype, values), shape, dtype);
  }
  /** A 1-D int64 tensor. */
  ints(values: number[]): Value {
    return this.constant(BigInt64Array.from(values.map(BigInt)), [values.length], "int64");
  }
  /** The run-time shape of `v` as a 1-D int64 tensor (a constant when `v` is static). */
  shapeOf(v: Value): Value {
    if (isStatic(v.shape)) return this.ints(v.shape);
    return this.emit("Shape", [v], [{ shape: [v.rank], dtype: "int64" }])[0];
  }
  /** Zeros shaped like `like` (dtype of `like`). */
  zerosLike(like: Value): Value {
    const zero = tensorProto(floatArray(like.dtype, [0]), [1], like.dtype);
    return this.emit("ConstantOfShape", [this.shapeOf(like)], [like], [
      tensorAttr("value", zero),
    ])[0];
  }

  // ------------------------------------------------------------------ non-differentiable

  /** Comparison (`Less`, `LessOrEqual`, `Greater`, `GreaterOrEqual`, `Equal`) → bool. */
  compare(op: "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "Equal", a: Value, b: Value) {
    this.sameDType(op, a, b);
    return this.emit(op, [a, b], [{
      shape: broadcastShapes(op, a.shape, b.shape),
      dtype: "bool",
    }])[0];
  }
  /** Logical `And` of two bool tensors. */
  and(a: Value, b: Value): Value {
    return this.emit("And", [a, b], [{
      shape: broadcastShapes("And", a.shape, b.shape),
      dtype: "bool",
    }])[0];
  }
  /** Element type conversion; never differentiated. */
  cast(x: Value, dtype: DType): Value {
    return this.emit("Cast", [x], [{ shape: x.shape, dtype }], [intAttr("to", onnxCode(dtype))])[0];
  }
  /** `sg(x)`: the same values, but no gradient flows through. */
  stopGradient(x: Value): Value {
    return this.emit("Identity", [x], [x])[0];
  }

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
  private record(
    op: string,
    inputs: Value[],
    outputs: Value[],
    info: Record<string, unknown> = {},
  ): Value {
    if (this.recording && inputs.some((v) => v.requiresGrad)) {
      for (const o of outputs) o.requiresGrad = true;
      this.tape.push({ op, inputs, outputs, info });
    }
    return outputs[0];
  }
  private sameDType(op: string, a: Value, b: Value): void {
    if (a.dtype !== b.dtype) {
      this.fail(op, `operand dtypes must match: current dtypes are ${a.dtype} and ${b.dtype}`);
    }
  }
  private fail(op: string, why: string): never {
    throw new GraphBuildError(`Cannot build ${op} in graph "${this.name}" as ${why}`, op);
  }
  private claim(name: string): void {
    if (this.names.has(name)) {
      throw new GraphBuildError(
        `Cannot add "${name}" to graph "${this.name}" as names must be unique: it is already used`,
        "input",
      );
    }
    this.names.add(name);
  }
  private fresh(op: string): string {
    return `${op.toLowerCase()}_${this.counter++}`;
  }
}

function node(
  opType: string,
  name: string,
  input: string[],
  output: string[],
  attribute: Attribute[],
): NodeObject {
  return { opType, name, input, output, attribute };
}

function floatArray(dtype: DType, values: ArrayLike<number>): TensorData {
  if (dtype === "float64") return Float64Array.from(values);
  if (dtype === "float32") return Float32Array.from(values);
  if (dtype === "int64") return BigInt64Array.from(Array.from(values, (v) => BigInt(v)));
  if (dtype === "int32") return Int32Array.from(values);
  return Uint8Array.from(values);
}

function onnxCode(dtype: DType): number {
  return { float32: 1, int32: 6, int64: 7, bool: 9, float64: 11 }[dtype];
}
