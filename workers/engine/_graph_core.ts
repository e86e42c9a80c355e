/**
 * The graph builder's core: values, inputs/outputs, raw node emission, constants, the
 * non-differentiable ops and the tape. `Graph` (graph.ts) adds the differentiable primitives.
 */
import {
  type Attribute,
  type Dim,
  type DType,
  encodeModel,
  intAttr,
  type NodeObject,
  OPSET,
  tensorAttr,
  type TensorData,
  tensorProto,
  valueInfo,
} from "./onnx_proto.ts";
import { broadcastShapes, GraphBuildError, isStatic } from "./shape.ts";

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

/** Float element types (the ones primitives differentiate). */
export const FLOATS: DType[] = ["float32", "float64"];

/** An ONNX graph under construction. */
/** Graph plumbing shared by every op; see `Graph`. */
export class GraphCore {
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

  // ------------------------------------------------------------------ internals

  protected record(
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
  protected sameDType(op: string, a: Value, b: Value): void {
    if (a.dtype !== b.dtype) {
      this.fail(op, `operand dtypes must match: current dtypes are ${a.dtype} and ${b.dtype}`);
    }
  }
  protected fail(op: string, why: string): never {
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
