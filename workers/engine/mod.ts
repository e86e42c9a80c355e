/**
 * The engine: build ONNX graphs in TypeScript, differentiate them in reverse mode into
 * standard ONNX ops, and run them on onnxruntime-node with a session cache. No onnxruntime JS
 * package has a training API, so gradients are graph ops too: `autodiff.ts` holds one backward
 * rule per primitive, composites (`nn.ts`) get theirs for free (RMSNorm and SiLU, on every
 * layer, have a hand-derived rule that takes fewer passes), and every rule is checked against
 * finite differences (tests/workers/engine/autodiff_test.ts).
 * It imports no other folder of the repository: `workers/model` builds the model's graphs on it.
 *
 * ```ts
 * const g = new Graph("demo", "float64");
 * const w = g.input("w", [3], { requiresGrad: true });
 * const loss = g.reduceSum(g.mul(w, w), [0], false);
 * g.output(loss, "loss");
 * g.output(gradients(g, loss, [w])[0], "grad.w");
 * const session = await createSession(g.toModel());
 * ```
 */
export { type Dim, type DType, intAttr, OPSET } from "./onnx_proto.ts";
export { formatShape, GraphBuildError } from "./shape.ts";
export { Graph, type TapeEntry, Value } from "./graph.ts";
export { DIFFERENTIABLE_OPS, gradients, unbroadcast } from "./autodiff.ts";
export * as nn from "./nn.ts";
export {
  createSession,
  type EngineOptions,
  type ExecutionProvider,
  ProviderUnavailableError,
  SessionCache,
  sessionOptions,
  type Tensor,
  tensor,
  yieldToEventLoop,
} from "./session.ts";
export {
  checkProvider,
  chooseExecutionProvider,
  EXECUTION_PROVIDERS,
  explainProviderFailure,
  NoExecutionProviderError,
  probeProvider,
  type ProviderCheck,
  type ProviderChoice,
} from "./providers.ts";
