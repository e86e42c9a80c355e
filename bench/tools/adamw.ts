/**
 * AdamW's update alone, on a bench model's parameters (random weights, gradients and moments):
 * `deno run -A bench/tools/adamw.ts [--only medium|small] [--steps 9]`.
 *
 * Variants of the per-element loop run interleaved in one process (order rotated every step), each
 * on its own copy of the weights and moments with the same gradients, so load changes hit all alike.
 * Prints per variant the median wall time of a step (ms), ns per parameter, the speed-up over
 * main's loop, and how many float32 weights differ from main's loop after all steps (0 = the
 * variant is bit-identical). Not a test: numbers vary with load.
 */
import { parseArgs } from "node:util";
import { cpuUsage } from "node:process";
import { type Parameters, parameterSpecs } from "../../workers/model/config.ts";
import { AdamW, updateInJs } from "../../workers/model/optim.ts";
import { Rng } from "../../workers/model/sampling.ts";
import type { AdamWScalars } from "../../workers/model/_adamw_wasm.ts";
import { CONFIGS } from "../_engine_configs.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    only: { type: "string", default: "medium" },
    steps: { type: "string", default: "9" },
  },
});
const entry = CONFIGS.find((c) => c.name === args.only);
const steps = Number(args.steps);
if (!entry || !(Number.isInteger(steps) && steps >= 1)) {
  throw new RangeError(
    `Cannot run the AdamW bench as --only must be one of ${
      CONFIGS.map((c) => c.name).join(", ")
    } and --steps an integer ≥ 1: current values are ${args.only} and ${args.steps}`,
  );
}
const specs = parameterSpecs(entry.config);
const count = specs.reduce((a, s) => a + s.shape.reduce((x, y) => x * y, 1), 0);
const hyper = { lr: 1e-4, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0.01 };

/** One tensor's update in place: weights p, gradients g, moments m and v (same length). */
type Kernel = (
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  k: AdamWScalars,
) => void;

/** main's loop (84c4cd2; now AdamW's path for tensors too large for the kernel): the reference for bits. */
const mainLoop: Kernel = updateInJs;

/** Hoisted constants, moments kept in locals (rounded as the store rounds): same bits. */
const tightLoop: Kernel = (p, g, m, v, k) => {
  const { b1, b2, eps, stepSize, bc2Sqrt, decay } = k;
  const c1 = 1 - b1, c2 = 1 - b2;
  for (let i = 0, n = p.length; i < n; i++) {
    const gi = g[i];
    const mi = Math.fround(b1 * m[i] + c1 * gi);
    const vi = Math.fround(b2 * v[i] + c2 * gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - stepSize * mi / (Math.sqrt(vi) / bc2Sqrt + eps);
  }
};

/** As tightLoop with one division: √v·(1/√(1 − β2^t)); float64 rounding differs slightly. */
const oneDivision: Kernel = (p, g, m, v, k) => {
  const { b1, b2, eps, stepSize, decay } = k;
  const c1 = 1 - b1, c2 = 1 - b2, inv = 1 / k.bc2Sqrt;
  for (let i = 0, n = p.length; i < n; i++) {
    const gi = g[i];
    const mi = Math.fround(b1 * m[i] + c1 * gi);
    const vi = Math.fround(b2 * v[i] + c2 * gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - stepSize * mi / (Math.sqrt(vi) * inv + eps);
  }
};

/** A variant's own weights and moments (copies of the same random start). */
interface Side {
  name: string;
  params: Parameters;
  step: (grads: Parameters, t: number) => void;
  ms: number[];
  cpuMs: number[];
}

const rng = new Rng(7);
/** Approximately normal(0, scale) floats (sum of 4 uniforms, variance-matched). */
function randn(n: number, scale: number): Float32Array {
  const out = new Float32Array(n);
  const s = scale * Math.sqrt(3);
  for (let i = 0; i < n; i++) {
    out[i] = s * (rng.next() + rng.next() + rng.next() + rng.next() - 2);
  }
  return out;
}
const start: Parameters = new Map(specs.map((s) => [s.name, randn(size(s.shape), 0.02)]));
const grads: Parameters[] = Array.from(
  { length: 2 },
  () => new Map(specs.map((s) => [s.name, randn(size(s.shape), 1e-3)])),
);
function size(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}
const copy = (m: Parameters): Parameters => new Map([...m].map(([k, v]) => [k, v.slice()]));

/** A side that runs `kernel` per tensor with scalars derived as AdamW.step derives them. */
function kernelSide(name: string, kernel: Kernel): Side {
  const params = copy(start);
  const m = new Map(specs.map((s) => [s.name, new Float32Array(size(s.shape))]));
  const v = new Map(specs.map((s) => [s.name, new Float32Array(size(s.shape))]));
  const [b1, b2] = hyper.betas;
  const step = (g: Parameters, t: number) => {
    const bc1 = 1 - b1 ** t;
    const scalars = { b1, b2, eps: hyper.eps, stepSize: hyper.lr / bc1, bc2Sqrt: 0, decay: 1 };
    scalars.bc2Sqrt = Math.sqrt(1 - b2 ** t);
    for (const s of specs) {
      scalars.decay = s.shape.length >= 2 ? 1 - hyper.lr * hyper.weightDecay : 1;
      kernel(params.get(s.name)!, g.get(s.name)!, m.get(s.name)!, v.get(s.name)!, scalars);
    }
  };
  return { name, params, step, ms: [], cpuMs: [] };
}

/** The optimizer as the trainer uses it (this checkout's workers/model/optim.ts). */
function classSide(): Side {
  const params = copy(start);
  const opt = new AdamW(specs, hyper);
  return { name: "AdamW.step", params, step: (g) => opt.step(params, g), ms: [], cpuMs: [] };
}

const sides: Side[] = [
  kernelSide("main loop", mainLoop),
  classSide(),
  kernelSide("tight loop", tightLoop),
  kernelSide("one division", oneDivision),
];

for (let t = 1; t <= steps; t++) {
  const g = grads[t % 2];
  for (let j = 0; j < sides.length; j++) {
    const side = sides[(j + t) % sides.length];
    const cpu0 = cpuUsage(), t0 = performance.now();
    side.step(g, t);
    side.ms.push(performance.now() - t0);
    const cpu = cpuUsage(cpu0);
    side.cpuMs.push((cpu.user + cpu.system) / 1000);
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
/** Weights that differ from the reference side's, and the largest difference relative to max |p|. */
function diff(a: Parameters, b: Parameters): { differ: number; rel: number } {
  let differ = 0, worst = 0, scale = 0;
  for (const [name, x] of a) {
    const y = b.get(name)!;
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) differ++;
      worst = Math.max(worst, Math.abs(x[i] - y[i]));
      scale = Math.max(scale, Math.abs(x[i]));
    }
  }
  return { differ, rel: worst / scale };
}

const ref = sides[0];
const refMs = median(ref.ms);
console.log(
  `AdamW on ${entry.name} (${(count / 1e6).toFixed(2)}M parameters, ${specs.length} tensors), ` +
    `${steps} steps each, interleaved; load average ${Deno.readTextFileSync("/proc/loadavg")}`,
);
console.log(
  "variant        median ms  CPU ms  ns/param  speed-up  weights ≠ main  max |Δ|/max |p|",
);
for (const s of sides) {
  const ms = median(s.ms), d = diff(ref.params, s.params);
  console.log(
    [
      s.name.padEnd(13),
      ms.toFixed(1).padStart(10),
      median(s.cpuMs).toFixed(1).padStart(7),
      (ms * 1e6 / count).toFixed(2).padStart(9),
      `${(refMs / ms).toFixed(2)}×`.padStart(9),
      String(d.differ).padStart(15),
      d.rel.toExponential(1).padStart(16),
    ].join(" "),
  );
}
