/**
 * Reverse-mode autodiff over the graph's tape. The backward pass is written into the same
 * graph in standard ONNX ops, so one onnxruntime session computes the loss and every gradient.
 *
 * One table of rules, one short rule per primitive (tinygrad/micrograd style). Each rule maps
 * the output gradients to one gradient per input (`null` for inputs that take none, such as
 * indices and conditions). Broadcasting is undone in exactly one place, `unbroadcast`.
 * Gradient fan-in (a value used twice, e.g. tied embeddings) is summed in `gradients`.
 * Composites recorded as one op (`Graph.composite`: RMSNorm, SiLU, LogSoftmaxPick) have rules
 * here too.
 */
import { Graph, type TapeEntry, Value } from "./graph.ts";
import { formatShape, GraphBuildError, isStatic, sameShape } from "./shape.ts";

/** A backward rule: output gradients (null where no gradient reached) → input gradients. */
type Rule = (g: Graph, e: TapeEntry, gy: (Value | null)[]) => (Value | null)[];

/**
 * Sum a gradient that was broadcast in the forward pass back to `target`'s shape: reduce the
 * leading dims the forward added and the dims where `target` has size 1.
 */
export function unbroadcast(g: Graph, grad: Value, target: Value): Value {
  if (sameShape(grad.shape, target.shape)) return grad;
  const extra = grad.rank - target.rank;
  const axes: number[] = [];
  for (let i = 0; i < grad.rank; i++) {
    const t = i - extra;
    if (t < 0 || (target.shape[t] === 1 && grad.shape[i] !== 1)) axes.push(i);
  }
  const summed = axes.length ? g.reduceSum(grad, axes, true) : grad;
  return sameShape(summed.shape, target.shape) ? summed : reshapeLike(g, summed, target);
}

/** Reshape `x` to the (run-time) shape of `like`. */
function reshapeLike(g: Graph, x: Value, like: Value): Value {
  return g.emit("Reshape", [x, g.shapeOf(like)], [like])[0];
}

/** Swap the last two dims. */
function swapLast(g: Graph, x: Value): Value {
  const perm = [...x.shape.keys()];
  [perm[x.rank - 2], perm[x.rank - 1]] = [perm[x.rank - 1], perm[x.rank - 2]];
  return g.transpose(x, perm);
}

const one = (g: Graph, v: Value) => g.scalar(1, v.dtype);

/** The backward rules, keyed by ONNX op type. */
export const RULES: Record<string, Rule> = {
  Identity: (_g, _e, [gy]) => [gy],
  Add: (g, { inputs: [a, b] }, [gy]) => [
    a.requiresGrad ? unbroadcast(g, gy!, a) : null,
    b.requiresGrad ? unbroadcast(g, gy!, b) : null,
  ],
  Sub: (g, { inputs: [a, b] }, [gy]) => [
    a.requiresGrad ? unbroadcast(g, gy!, a) : null,
    b.requiresGrad ? unbroadcast(g, g.neg(gy!), b) : null,
  ],
  Mul: (g, { inputs: [a, b] }, [gy]) => [
    a.requiresGrad ? unbroadcast(g, g.mul(gy!, b), a) : null,
    b.requiresGrad ? unbroadcast(g, g.mul(gy!, a), b) : null,
  ],
  Div: (g, { inputs: [a, b], outputs: [y] }, [gy]) => [
    a.requiresGrad ? unbroadcast(g, g.div(gy!, b), a) : null,
    b.requiresGrad ? unbroadcast(g, g.neg(g.div(g.mul(gy!, y), b)), b) : null,
  ],
  Neg: (g, _e, [gy]) => [g.neg(gy!)],
  Exp: (g, { outputs: [y] }, [gy]) => [g.mul(gy!, y)],
  Log: (g, { inputs: [x] }, [gy]) => [g.div(gy!, x)],
  Sqrt: (g, { outputs: [y] }, [gy]) => [g.div(g.mul(gy!, g.scalar(0.5, y.dtype)), y)],
  Reciprocal: (g, { outputs: [y] }, [gy]) => [g.neg(g.mul(gy!, g.mul(y, y)))],
  // d xᵖ/dx = p·xᵖ⁻¹
  Pow: (g, { inputs: [x], info }, [gy]) => {
    const p = info.p as number;
    const xp = p === 2 ? x : g.pow(x, p - 1);
    return [g.mul(gy!, g.mul(xp, g.scalar(p, x.dtype)))];
  },
  Sigmoid: (g, { outputs: [y] }, [gy]) => [g.mul(gy!, g.mul(y, g.sub(one(g, y), y)))],
  Tanh: (g, { outputs: [y] }, [gy]) => [g.mul(gy!, g.sub(one(g, y), g.mul(y, y)))],
  // d erf(x)/dx = 2/√π · e^(−x²)
  Erf: (g, { inputs: [x] }, [gy]) => [
    g.mul(gy!, g.mul(g.scalar(2 / Math.sqrt(Math.PI), x.dtype), g.exp(g.neg(g.mul(x, x))))),
  ],
  Where: (g, { inputs: [c, a, b] }, [gy]) => {
    const zero = g.scalar(0, gy!.dtype);
    return [
      null,
      a.requiresGrad ? unbroadcast(g, g.where(c, gy!, zero), a) : null,
      b.requiresGrad ? unbroadcast(g, g.where(c, zero, gy!), b) : null,
    ];
  },
  // Y = A·B: dA = dY·Bᵀ, dB = Aᵀ·dY. A weight matrix shared across a batch gets its gradient
  // as one Gemm over all flattened rows (transA), not a batched MatMul plus a ReduceSum.
  MatMul: (g, { inputs: [a, b] }, [gy]) => {
    const ga = a.requiresGrad ? unbroadcast(g, g.matmul(gy!, swapLast(g, b)), a) : null;
    let gb: Value | null = null;
    if (b.requiresGrad && b.rank === 2 && a.rank > 2) {
      const k = a.shape.at(-1)!, n = b.shape.at(-1)!;
      gb = g.gemm(g.reshape(a, ["rows", k]), g.reshape(gy!, ["rows", n]), { transA: true });
    } else if (b.requiresGrad) gb = unbroadcast(g, g.matmul(swapLast(g, a), gy!), b);
    return [ga, gb];
  },
  // Y = op(A)·op(B) + C (op = transpose when the flag is set).
  Gemm: (g, { inputs: [a, b, c], info }, [gy]) => {
    const tA = info.transA as boolean, tB = info.transB as boolean;
    const ga = !a.requiresGrad ? null : tA
      ? g.gemm(b, gy!, { transA: tB, transB: true }) // dA = op(B)·dYᵀ
      : g.gemm(gy!, b, { transB: !tB }); // dA = dY·op(B)ᵀ
    const gb = !b.requiresGrad ? null : tB
      ? g.gemm(gy!, a, { transA: true, transB: tA }) // dB = dYᵀ·op(A)
      : g.gemm(a, gy!, { transA: !tA }); // dB = op(A)ᵀ·dY
    return c ? [ga, gb, c.requiresGrad ? unbroadcast(g, gy!, c) : null] : [ga, gb];
  },
  Reshape: (g, { inputs: [x] }, [gy]) => [reshapeLike(g, gy!, x)],
  Transpose: (g, { info }, [gy]) => {
    const perm = info.perm as number[];
    return [g.transpose(gy!, perm.map((_, i) => perm.indexOf(i)))];
  },
  Expand: (g, { inputs: [x] }, [gy]) => [unbroadcast(g, gy!, x)],
  Split: (g, { outputs, info }, gys) => [
    g.concat(gys.map((gy, i) => gy ?? g.zerosLike(outputs[i])), info.axis as number),
  ],
  Concat: (g, { inputs, info }, [gy]) => {
    const axis = info.axis as number;
    const sizes = inputs.map((x) => x.shape[axis]);
    if (!isStatic(sizes)) {
      throw new GraphBuildError(
        "Cannot differentiate Concat over a symbolic axis as its sizes must be static",
        "Concat",
      );
    }
    return g.split(gy!, axis, sizes).map((d, i) => (inputs[i].requiresGrad ? d : null));
  },
  ReduceSum: (g, { inputs: [x], info }, [gy]) => [expandBack(g, gy!, x, info)],
  ReduceMean: (g, { inputs: [x], info }, [gy]) => {
    const count = (info.axes as number[]).reduce((p, a) => p * Number(x.shape[a]), 1);
    if (!Number.isFinite(count)) {
      throw new GraphBuildError("Cannot differentiate ReduceMean over symbolic axes", "ReduceMean");
    }
    return [g.mul(expandBack(g, gy!, x, info), g.scalar(1 / count, x.dtype))];
  },
  // dX = Y ⊙ (dY − Σ dY⊙Y)
  Softmax: (g, { outputs: [y], info }, [gy]) => {
    const s = g.reduceSum(g.mul(gy!, y), [info.axis as number], true);
    return [g.mul(y, g.sub(gy!, s))];
  },
  // dX = dY − softmax(X) ⊙ Σ dY
  LogSoftmax: (g, { outputs: [y], info }, [gy]) => {
    const s = g.reduceSum(gy!, [info.axis as number], true);
    return [g.sub(gy!, g.mul(g.exp(y), s))];
  },
  // Composites (nn.ts). RMSNorm y = q ⊙ w with q = x / r, r = √(mean(x²) + ε) over the last
  // dim (C): dw = Σ dy ⊙ q; with dq = dy ⊙ w, dx = (dq − q ⊙ mean(dq ⊙ q)) / r, since
  // ∂qᵢ/∂xⱼ = δᵢⱼ/r − qᵢqⱼ/(C·r).
  RMSNorm: (g, { inputs: [x, w], info }, [gy]) => {
    const q = info.normed as Value, r = info.rms as Value;
    let gx: Value | null = null;
    if (x.requiresGrad) {
      const gq = g.mul(gy!, w); // (…, C)
      const s = g.reduceMean(g.mul(gq, q), [-1], true); // (…, 1)
      gx = g.div(g.sub(gq, g.mul(q, s)), r);
    }
    return [gx, w.requiresGrad ? unbroadcast(g, g.mul(gy!, q), w) : null];
  },
  // SiLU y = x·σ(x): dx = dy ⊙ (σ + y ⊙ (1 − σ)).
  SiLU: (g, { outputs: [y], info }, [gy]) => {
    const s = info.sigmoid as Value;
    return [g.mul(gy!, g.add(s, g.mul(y, g.sub(one(g, s), s))))];
  },
  // picked = log_softmax(z)[t] (nn.ts logSoftmaxPick): dz = g·(onehot(t) − softmax(z)), written
  // as −g·exp(logp) with g added at each target by ScatterElements.
  LogSoftmaxPick: (g, { inputs: [z], info }, [gy]) => {
    const logp = info.logp as Value, targets = info.targets as Value;
    const idx = g.reshape(targets, [...targets.shape, 1]); // (…, 1)
    const gcol = g.reshape(gy!, idx.shape); // (…, 1)
    const dz = g.mul(g.exp(logp), g.neg(gcol)); // (…, V)
    return [g.scatterAdd(dz, idx, gcol, z.rank - 1)];
  },
  // Rows gathered by id: scatter-add the row gradients back (duplicate ids accumulate).
  // ScatterElements, not ScatterND: onnxruntime's CPU ScatterND (reduction="add") splits the
  // updates over intra-op threads with no lock, so on 2+ threads two updates of one row could
  // race (a lost update: up to 25% of the largest entry of a tiny model's embedding gradient)
  // and the summation order varied run to run. Its ScatterElements adds the updates one after
  // another in index order: what ScatterND gives on one thread, on any number of threads.
  // Cost: linear, ~15–35 ns per element (n·width) on these cores, ~2% of a train call; a
  // one-hot MatMul was faster for the embedding but costs n² for the scored-row gather.
  Gather: (g, { inputs: [table, ids] }, [gy]) => {
    const width = table.shape.slice(1);
    const ones = width.map(() => 1);
    const idx = g.emit("Reshape", [ids, g.ints([-1, ...ones])], [{
      shape: ["n", ...ones],
      dtype: "int64",
    }])[0]; // (n, 1, …)
    const upd = g.emit("Reshape", [gy!, g.ints([-1, ...(width as number[])])], [{
      shape: ["n", ...width],
      dtype: gy!.dtype,
    }])[0]; // (n, …width)
    const rows = g.emit("Expand", [idx, g.shapeOf(upd)], [{
      shape: upd.shape,
      dtype: "int64",
    }])[0]; // (n, …width): row id of every update element
    return [g.scatterAdd(g.zerosLike(table), rows, upd, 0), null];
  },
  GatherElements: (g, { inputs: [x, idx], info }, [gy]) => [
    g.scatterAdd(g.zerosLike(x), idx, gy!, info.axis as number),
    null,
  ],
};

/** Undo a reduction's shape change: restore kept dims, then broadcast back to `x`. */
function expandBack(g: Graph, gy: Value, x: Value, info: Record<string, unknown>): Value {
  const axes = info.axes as number[];
  const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const k = info.keepDims
    ? gy
    : g.emit("Unsqueeze", [gy, g.ints(axes)], [{ shape: kept, dtype: gy.dtype }])[0];
  return g.emit("Expand", [k, g.shapeOf(x)], [x])[0];
}

/**
 * Write the gradients of scalar `loss` with respect to each of `wrt` into the graph.
 * Throws GraphBuildError when `loss` is not a scalar, when an op on the path has no rule,
 * when a rule returns the wrong number or shape of gradients, or when some `wrt` does not
 * influence `loss`.
 */
export function gradients(g: Graph, loss: Value, wrt: Value[]): Value[] {
  if (loss.rank !== 0) {
    throw new GraphBuildError(
      `Cannot differentiate ${loss.name} as the loss must be a scalar: current shape is ${
        formatShape(loss.shape)
      }`,
      "gradients",
    );
  }
  return g.withoutTape(() => {
    const grads = new Map<string, Value>([[loss.name, g.scalar(1, loss.dtype)]]);
    for (let i = g.tape.length - 1; i >= 0; i--) {
      const e = g.tape[i];
      const gy = e.outputs.map((o) => grads.get(o.name) ?? null);
      if (gy.every((v) => v === null)) continue;
      const rule = RULES[e.op];
      if (!rule) {
        throw new GraphBuildError(`Cannot differentiate ${e.op} as it has no backward rule`, e.op);
      }
      const gx = rule(g, e, gy);
      if (gx.length !== e.inputs.length) {
        throw new GraphBuildError(
          `Cannot differentiate ${e.op} as its rule must return ${e.inputs.length} gradients: it returned ${gx.length}`,
          e.op,
        );
      }
      e.inputs.forEach((x, k) => {
        const d = gx[k];
        if (!d || !x.requiresGrad) return;
        if (isStatic(d.shape) && isStatic(x.shape) && !sameShape(d.shape, x.shape)) {
          throw new GraphBuildError(
            `Cannot differentiate ${e.op} as the gradient of input ${k} must have shape ${
              formatShape(x.shape)
            }: current shape is ${formatShape(d.shape)}`,
            e.op,
          );
        }
        const prev = grads.get(x.name);
        grads.set(x.name, prev ? g.add(prev, d) : d); // fan-in: sum
      });
    }
    return wrt.map((p) => {
      const d = grads.get(p.name);
      if (!d) {
        throw new GraphBuildError(
          `Cannot return the gradient of ${p.name} as the loss must depend on it: no path reaches it`,
          "gradients",
        );
      }
      return d;
    });
  });
}

/** Names of the ops that have backward rules. */
export const DIFFERENTIABLE_OPS: readonly string[] = Object.keys(RULES);
