/**
 * AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization"), global gradient-norm
 * clipping and learning-rate schedules, on `Parameters` (float32 maps by HF name).
 *
 * The update follows `torch.optim.AdamW` (non-amsgrad, non-fused), per parameter p with gradient g
 * at step t (1-based):
 *   p ← p − lr·λ·p                       (decoupled weight decay; λ = 0 for 1-D tensors)
 *   m ← β1·m + (1 − β1)·g,   v ← β2·v + (1 − β2)·g²
 *   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε)
 * Like Hugging Face's Trainer, biases and norm weights (every 1-D tensor) get no weight decay.
 * The optimizer state is saved as `optimizer.safetensors` (`<name>.exp_avg`, `<name>.exp_avg_sq`,
 * F32; the step count and hyper-parameters in `__metadata__`).
 *
 * Arithmetic: every operation in float64, each of m, v and p rounded to float32 when stored (the
 * per-element loop runs as a WebAssembly SIMD kernel over moments kept in WebAssembly memory,
 * `_adamw_wasm.ts`, bit-identical to the plain JS loop it replaced and 1.8–2× faster on the 23.5M
 * bench model, bench/RESULTS.md "Where a train step's time goes").
 */
import type { Parameters, ParameterSpec } from "./config.ts";
import { readSafetensors, type Tensor, writeSafetensors } from "./safetensors.ts";
import { type AdamWScalars, MAX_TENSOR_ELEMENTS, WasmMoments } from "./_adamw_wasm.ts";

/** Thrown on mismatched parameters/gradients/state or invalid hyper-parameters. */
export class OptimizerError extends Error {
  override name = "OptimizerError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** AdamW hyper-parameters (torch defaults: betas [0.9, 0.999], eps 1e-8, weightDecay 0.01). */
export interface AdamWOptions {
  /** Learning rate used when `step()` is called without one. */
  lr: number;
  betas?: [number, number];
  eps?: number;
  /** Decoupled weight decay λ (per unit lr), applied to tensors with 2+ dimensions only. */
  weightDecay?: number;
  /**
   * Tensors of more elements than this are updated by the plain JS loop, with their moments in
   * JS memory (same bits, ~2× slower); default `MAX_TENSOR_ELEMENTS` (~537M, the most one
   * WebAssembly memory holds: a 7B model's embedding can be larger). Lower only in tests.
   */
  maxKernelElements?: number;
}

/** Optimizer state: completed step count and per-parameter moment estimates (float32). */
export interface AdamWState {
  step: number;
  /** First moment m, by parameter name, same length as the parameter. */
  expAvg: Parameters;
  /** Second moment v, by parameter name. */
  expAvgSq: Parameters;
}

/** AdamW over a fixed set of parameters (given by their specs). Mutates parameters in place. */
export class AdamW {
  readonly specs: ParameterSpec[];
  readonly lr: number;
  readonly betas: [number, number];
  readonly eps: number;
  readonly weightDecay: number;
  #step = 0;
  /** m and v by parameter name: views into `#moments` (WebAssembly memory), or JS arrays. */
  #m = new Map<string, Float32Array>();
  #v = new Map<string, Float32Array>();
  #moments: WasmMoments;
  /** Per spec, its index in `#moments`, or −1 for a tensor the JS loop updates. */
  #kernelIndex: number[];

  /**
   * @throws {OptimizerError} on a non-finite or negative lr/eps/weightDecay, betas outside [0, 1),
   *   or `maxKernelElements` not an integer in [0, `MAX_TENSOR_ELEMENTS`].
   */
  constructor(specs: ParameterSpec[], opts: AdamWOptions) {
    this.specs = specs;
    this.lr = opts.lr;
    this.betas = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    this.weightDecay = opts.weightDecay ?? 0.01;
    const bad = (v: number) => !Number.isFinite(v) || v < 0;
    if (bad(this.lr) || bad(this.eps) || bad(this.weightDecay)) {
      throw new OptimizerError(
        `Cannot create AdamW as lr, eps and weightDecay must be finite and ≥ 0: current values are ${this.lr}, ${this.eps}, ${this.weightDecay}`,
      );
    }
    if (this.betas.some((b) => !(b >= 0 && b < 1))) {
      throw new OptimizerError(
        `Cannot create AdamW as betas must be in [0, 1): current value is [${this.betas}]`,
      );
    }
    const most = opts.maxKernelElements ?? MAX_TENSOR_ELEMENTS;
    if (!Number.isInteger(most) || most < 0 || most > MAX_TENSOR_ELEMENTS) {
      throw new OptimizerError(
        `Cannot create AdamW as maxKernelElements must be an integer in [0, ${MAX_TENSOR_ELEMENTS}]: current value is ${most}`,
      );
    }
    const sizes = specs.map((s) => s.shape.reduce((a, b) => a * b, 1));
    const inKernel = sizes.filter((n) => n <= most);
    let next = 0;
    this.#kernelIndex = sizes.map((n) => (n <= most ? next++ : -1));
    this.#moments = new WasmMoments(inKernel);
    specs.forEach((s, k) => {
      const w = this.#kernelIndex[k];
      this.#m.set(s.name, w >= 0 ? this.#moments.expAvg(w) : new Float32Array(sizes[k]));
      this.#v.set(s.name, w >= 0 ? this.#moments.expAvgSq(w) : new Float32Array(sizes[k]));
    });
  }

  /** Completed steps (t of the last update). */
  get stepCount(): number {
    return this.#step;
  }

  /**
   * One AdamW update of every parameter in `specs`, in place.
   * @param lr learning rate for this step (e.g. from `learningRate`); defaults to `opts.lr`.
   * @throws {OptimizerError} when a parameter or gradient is missing or has the wrong length.
   */
  step(params: Parameters, grads: Parameters, lr: number = this.lr): void {
    for (const s of this.specs) this.#check(s, params, grads);
    this.#step++;
    const [b1, b2] = this.betas;
    const bc1 = 1 - b1 ** this.#step;
    const bc2Sqrt = Math.sqrt(1 - b2 ** this.#step);
    const scalars = { b1, b2, eps: this.eps, stepSize: lr / bc1, bc2Sqrt, decay: 1 };
    this.specs.forEach((s, k) => {
      scalars.decay = s.shape.length >= 2 ? 1 - lr * this.weightDecay : 1;
      const p = params.get(s.name)!, g = grads.get(s.name)!, w = this.#kernelIndex[k];
      if (w >= 0) this.#moments.update(w, p, g, scalars);
      else updateInJs(p, g, this.#m.get(s.name)!, this.#v.get(s.name)!, scalars);
    });
  }

  #check(s: ParameterSpec, params: Parameters, grads: Parameters): void {
    const n = this.#m.get(s.name)!.length;
    for (const [what, map] of [["parameter", params], ["gradient", grads]] as const) {
      const t = map.get(s.name);
      if (!t || t.length !== n) {
        throw new OptimizerError(
          `Cannot step AdamW as ${what} ${s.name} must hold ${n} values: current length is ${
            t?.length ?? "missing"
          }`,
        );
      }
    }
  }

  /** A deep copy of the state (step and moments). */
  state(): AdamWState {
    const copy = (m: Map<string, Float32Array>) => new Map([...m].map(([k, v]) => [k, v.slice()]));
    return { step: this.#step, expAvg: copy(this.#m), expAvgSq: copy(this.#v) };
  }

  /**
   * Replaces the state with a copy of `state` (e.g. from `readOptimizerState`).
   * @throws {OptimizerError} when the step is not a non-negative integer or a moment is missing
   *   or has the wrong length.
   */
  load(state: AdamWState): void {
    if (!Number.isInteger(state.step) || state.step < 0) {
      throw new OptimizerError(
        `Cannot load AdamW state as step must be an integer ≥ 0: current value is ${state.step}`,
      );
    }
    for (const s of this.specs) {
      const n = this.#m.get(s.name)!.length;
      for (
        const [what, map] of [["exp_avg", state.expAvg], ["exp_avg_sq", state.expAvgSq]] as const
      ) {
        const t = map.get(s.name);
        if (!t || t.length !== n) {
          throw new OptimizerError(
            `Cannot load AdamW state as ${what} of ${s.name} must hold ${n} values: current length is ${
              t?.length ?? "missing"
            }`,
          );
        }
      }
    }
    for (const s of this.specs) {
      this.#m.get(s.name)!.set(state.expAvg.get(s.name)!);
      this.#v.get(s.name)!.set(state.expAvgSq.get(s.name)!);
    }
    this.#step = state.step;
  }
}

/**
 * The per-element update in plain JS (float64 operations, float32 stores), for tensors too large
 * for the kernel's memory: the loop the kernel reproduces bit for bit (`_adamw_wasm.ts`;
 * tests/workers/model/optim_test.ts checks the two agree). p, g, m, v: (n,) float32; m, v and p
 * updated in place.
 */
export function updateInJs(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  s: AdamWScalars,
): void {
  const { b1, b2, stepSize, bc2Sqrt, decay, eps } = s;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] = p[i] * decay - stepSize * m[i] / (Math.sqrt(v[i]) / bc2Sqrt + eps);
  }
}

/**
 * Serialises optimizer state as `optimizer.safetensors` bytes: `<name>.exp_avg` and
 * `<name>.exp_avg_sq` (F32, the parameter's shape), metadata `{step, optimizer: "AdamW"}`.
 */
export function writeOptimizerState(state: AdamWState, specs: ParameterSpec[]): Uint8Array {
  const tensors = new Map<string, Tensor>();
  for (const s of specs) {
    tensors.set(`${s.name}.exp_avg`, { shape: s.shape, data: state.expAvg.get(s.name)! });
    tensors.set(`${s.name}.exp_avg_sq`, { shape: s.shape, data: state.expAvgSq.get(s.name)! });
  }
  return writeSafetensors(tensors, {
    metadata: { format: "pt", optimizer: "AdamW", step: String(state.step) },
  });
}

/**
 * Parses `optimizer.safetensors` bytes written by `writeOptimizerState`.
 * @throws {OptimizerError} when the step metadata is missing or a moment tensor is absent.
 * @throws {SafetensorsError} when the bytes are not a valid safetensors file.
 */
export function readOptimizerState(bytes: Uint8Array, specs: ParameterSpec[]): AdamWState {
  const file = readSafetensors(bytes);
  const step = Number(file.metadata.step);
  if (file.metadata.step === undefined || !Number.isInteger(step) || step < 0) {
    throw new OptimizerError(
      `Cannot read optimizer state as metadata step must be an integer ≥ 0: current value is ${file.metadata.step}`,
    );
  }
  const state: AdamWState = { step, expAvg: new Map(), expAvgSq: new Map() };
  for (const s of specs) {
    for (
      const [suffix, map] of [["exp_avg", state.expAvg], ["exp_avg_sq", state.expAvgSq]] as const
    ) {
      const t = file.tensors.get(`${s.name}.${suffix}`);
      if (!t) {
        throw new OptimizerError(
          `Cannot read optimizer state as it must hold ${s.name}.${suffix}: it does not`,
        );
      }
      map.set(s.name, t.data);
    }
  }
  return state;
}

/**
 * Scales all gradients in place so their global L2 norm is at most `maxNorm` (as
 * `torch.nn.utils.clip_grad_norm_`: coefficient maxNorm / (norm + 1e-6), only when < 1).
 * Returns the global norm before clipping; when it is not finite nothing is scaled.
 * @throws {OptimizerError} when maxNorm is not positive.
 */
export function clipGradNorm(grads: Parameters, maxNorm: number): number {
  if (!(maxNorm > 0)) {
    throw new OptimizerError(
      `Cannot clip gradients as maxNorm must be > 0: current value is ${maxNorm}`,
    );
  }
  let sumSq = 0;
  for (const g of grads.values()) for (let i = 0; i < g.length; i++) sumSq += g[i] * g[i];
  const norm = Math.sqrt(sumSq);
  const coef = maxNorm / (norm + 1e-6);
  if (Number.isFinite(norm) && coef < 1) {
    for (const g of grads.values()) for (let i = 0; i < g.length; i++) g[i] *= coef;
  }
  return norm;
}

/** A learning-rate schedule over optimizer steps. */
export interface LearningRateSchedule {
  /**
   * `constant`: lr; `warmup`: linear warmup then lr; `cosine`: linear warmup then cosine decay to
   * minLr.
   */
  kind: "constant" | "warmup" | "cosine";
  /** Peak learning rate. */
  lr: number;
  /** Steps of linear warmup (0 for none). */
  warmupSteps: number;
  /** Total steps of the run (cosine reaches minLr at step totalSteps). */
  totalSteps: number;
  /** Floor of the cosine decay (default 0). */
  minLr?: number;
}

/**
 * The learning rate for 0-based update index `step`. Warmup is lr·(step + 1)/warmupSteps for
 * step < warmupSteps (so the first update is not wasted at lr 0, unlike HF's schedulers);
 * cosine is minLr + (lr − minLr)·½(1 + cos(π·q)), q = (step − warmupSteps)/(totalSteps −
 * warmupSteps) clamped to [0, 1] (Loshchilov & Hutter 2017, SGDR, without restarts).
 * @throws {OptimizerError} on a negative step, lr, warmupSteps or totalSteps.
 */
export function learningRate(step: number, schedule: LearningRateSchedule): number {
  const { kind, lr, warmupSteps, totalSteps } = schedule;
  const minLr = schedule.minLr ?? 0;
  if (!(step >= 0) || !(lr >= 0) || !(warmupSteps >= 0) || !(totalSteps >= 0) || !(minLr >= 0)) {
    throw new OptimizerError(
      `Cannot compute a learning rate as step, lr, warmupSteps, totalSteps and minLr must be ≥ 0: current values are ${step}, ${lr}, ${warmupSteps}, ${totalSteps}, ${minLr}`,
    );
  }
  if (kind === "constant") return lr;
  if (step < warmupSteps) return lr * (step + 1) / warmupSteps;
  if (kind === "warmup") return lr;
  const span = Math.max(1, totalSteps - warmupSteps);
  const q = Math.min(1, (step - warmupSteps) / span);
  return minLr + (lr - minLr) * 0.5 * (1 + Math.cos(Math.PI * q));
}
