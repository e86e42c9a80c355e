/**
 * Training objectives as data the train graph is built from. The model computes, at the R scored
 * (response) positions of a micro-batch, the log-prob ℓθ of each target token and the entropy H
 * of the next-token distribution; an objective turns those and its own named inputs into a loss
 * and named scalar outputs. The model knows no objective's meaning: it declares the inputs the
 * objective names, feeds them by name and sums what comes back.
 *
 * Counts and micro-batches: `Policy.trainStep` may split a step into several onnxruntime calls.
 * Every output of an objective (the loss included) must therefore be a sum over this call's
 * tokens, each divided by its count — one of the objective's `counts`, which the policy computes
 * over the step's samples and feeds per token ((R,): every token gets its own divisor). The calls'
 * outputs and gradients then simply add (weight 1), which is exact for any split and any number
 * of different denominators. A step of one micro-batch feeds every token N, the count over the
 * whole step (a token mean over the step); a step of M micro-batches (`TrainStepOptions.
 * microBatches`) feeds each token M·N_m, the count of its micro-batch times M, so every output is
 * the mean over micro-batches of their token means: the reference code's gradient accumulation
 * (verl `dp_actor.py`: each micro-batch's token-mean loss divided by the number of micro-batches).
 */
import type { Graph, Value } from "../engine/mod.ts";

/** Per-token values of the train graph, each (R,) float, aligned with its `targets`. */
export interface TokenValues {
  /** ℓθ: log-prob (nats) of each target token under the parameters being trained. */
  logp: Value;
  /** H: entropy (nats) of the next-token distribution at each scored position. */
  entropy: Value;
  /** `loss_mask`: 1 on response tokens that count, 0 on the bucket's unused slots. */
  mask: Value;
}

/**
 * What an objective declares of one scalar output.
 * - `over`: the count it is a mean over (its sums are divided by it; see module doc);
 * - `kind`: `"loss"` for a term of the loss (the total `loss` included): over no tokens its
 *   masked mean is exactly 0, as the reference code's `agg_loss` gives; `"statistic"` for a
 *   figure reported beside it (a share, a mean gate, the mean entropy): over no tokens it is
 *   undefined, and a caller leaves it out rather than report a made-up 0.
 */
export interface OutputSpec<C extends string = string> {
  readonly over: C;
  readonly kind: "loss" | "statistic";
}

/**
 * A training objective.
 * - `T`: per-token float inputs (R,), fed from each sample's `inputs[name]` (a number is
 *   broadcast to every response token of the sample);
 * - `S`: scalar float inputs (coefficients), fed once per step;
 * - `C`: token counts, fed per token as each token's divisor (see module doc);
 * - `O`: scalar outputs, `loss` among them.
 */
export interface TrainObjective<
  T extends string = string,
  S extends string = string,
  C extends string = string,
  O extends string = string,
> {
  /** Names the train graph and its cached sessions, e.g. `seed` or `token_nll`. */
  readonly name: string;
  /** Names of the per-token inputs. */
  readonly tokenInputs: readonly T[];
  /** Names of the scalar inputs. */
  readonly scalarInputs: readonly S[];
  /**
   * Each count by name → the per-token input that selects its tokens (those where it is > 0),
   * or null for every response token. The policy feeds M·max(1, count of the token's micro-batch)
   * (see module doc), so an empty count makes its sums 0, not NaN; the result reports the true
   * count over the step.
   */
  readonly counts: Readonly<Record<C, T | null>>;
  /**
   * Each scalar output by name → its count and kind (for averaging over steps). The total `loss`
   * is always a loss term.
   */
  readonly outputs: Readonly<Record<O, OutputSpec<C>>> & {
    readonly loss: OutputSpec<C> & { readonly kind: "loss" };
  };
  /** Builds the loss and every output from the token values and the named inputs. */
  build(g: Graph, tokens: TokenValues, inputs: Readonly<Record<T | S | C, Value>>): Record<
    O | "loss",
    Value
  >;
}

/** A train objective of any input and output names. */
// deno-lint-ignore no-explicit-any
export type AnyObjective = TrainObjective<any, any, any, any>;

/** Names of the scalar outputs of an objective, `loss` included. */
export type OutputName<X> = X extends TrainObjective<string, string, string, infer O> ? O | "loss"
  : never;

/** Names of the counts of an objective. */
export type CountName<X> = X extends TrainObjective<string, string, infer C, string> ? C : never;

/** Names of the scalar inputs of an objective. */
export type ScalarName<X> = X extends TrainObjective<string, infer S, string, string> ? S : never;

/** Names of the per-token inputs of an objective. */
export type TokenInputName<X> = X extends TrainObjective<infer T, string, string, string> ? T
  : never;

/**
 * The step-wide value of each output of an objective from its sums over the step's train calls:
 * `sums[name]` is Σ output·count and `counts[c]` is Σ count over the calls, each count the one the
 * output declares it is a mean over. Over no tokens (count 0) a loss term is 0 and a statistic
 * is left out (see `OutputSpec`).
 */
export function stepMeans<O extends string, C extends string>(
  outputs: Readonly<Record<O, OutputSpec<C>>>,
  sums: Readonly<Partial<Record<O, number>>>,
  counts: Readonly<Partial<Record<C, number>>>,
): Partial<Record<O, number>> {
  const means: Partial<Record<O, number>> = {};
  for (const name of Object.keys(outputs) as O[]) {
    const { over, kind } = outputs[name];
    const n = counts[over] ?? 0;
    if (n > 0) means[name] = (sums[name] ?? 0) / n;
    else if (kind === "loss") means[name] = 0;
  }
  return means;
}

/**
 * Σ x·mask / count, with `count` a graph input: per token (R,), each token's divisor (module
 * doc), or a scalar. A mean whose calls add up. (R,) → ().
 */
export function sumOver(g: Graph, x: Value, mask: Value, count: Value): Value {
  const axes = [...x.shape.keys()];
  return g.reduceSum(g.div(g.mul(x, mask), count), axes, false); // ()
}

/**
 * Supervised fine-tuning: the negative log-likelihood of the response tokens, as a token mean
 * over the step's response tokens (or the mean of micro-batches' token means): loss =
 * −Σ mask·ℓθ / response_tokens.
 */
export const TOKEN_NLL: TrainObjective<never, never, "response_tokens", never> = {
  name: "token_nll",
  tokenInputs: [],
  scalarInputs: [],
  counts: { response_tokens: null },
  outputs: { loss: { over: "response_tokens", kind: "loss" } },
  build(g, t, inputs) {
    return { loss: g.neg(sumOver(g, t.logp, t.mask, inputs.response_tokens)) };
  },
};
