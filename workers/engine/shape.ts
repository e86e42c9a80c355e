/**
 * Shape algebra for the graph builder: numpy broadcasting over static and symbolic dims and
 * the build-time errors that name the op and both shapes.
 */
import type { Dim } from "./onnx_proto.ts";

/** A graph could not be built: wrong shapes, dtypes or arguments. Thrown at build time. */
export class GraphBuildError extends Error {
  override name = "GraphBuildError";
  constructor(message: string, readonly op: string) {
    super(message);
  }
}

/** `(2, T, 8)`: a shape as written in messages and comments. */
export function formatShape(shape: readonly Dim[]): string {
  return `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;
}

/** Whether two shapes are equal dim by dim (symbolic dims by name). */
export function sameShape(a: readonly Dim[], b: readonly Dim[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Whether every dim is a number. */
export function isStatic(shape: readonly Dim[]): shape is number[] {
  return shape.every((d) => typeof d === "number");
}

/** Element count of a static shape, or `null` when a dim is symbolic. */
export function numel(shape: readonly Dim[]): number | null {
  return isStatic(shape) ? shape.reduce((p, d) => p * d, 1) : null;
}

/**
 * Numpy broadcast of two shapes (right-aligned; a dim of 1 stretches). Two different symbolic
 * dims, or a symbolic dim against a static one other than 1, cannot be proven compatible at
 * build time and are rejected.
 */
export function broadcastShapes(op: string, a: readonly Dim[], b: readonly Dim[]): Dim[] {
  const r = Math.max(a.length, b.length);
  const out: Dim[] = [];
  for (let i = 0; i < r; i++) {
    const x = a[a.length - r + i] ?? 1;
    const y = b[b.length - r + i] ?? 1;
    if (x === y || y === 1) out.push(x);
    else if (x === 1) out.push(y);
    else {
      throw new GraphBuildError(
        `Cannot broadcast ${op} operands as dims must be equal or 1: current shapes are ` +
          `${formatShape(a)} and ${formatShape(b)}`,
        op,
      );
    }
  }
  return out;
}

/** Normalise a possibly negative axis for a tensor of rank `rank`, failing when out of range. */
export function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    throw new GraphBuildError(
      `Cannot apply ${op} on axis ${axis} as it must be in [-${rank}, ${rank}): current rank is ${rank}`,
      op,
    );
  }
  return a;
}
