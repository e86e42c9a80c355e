/**
 * Seeded randomness and next-token sampling.
 *
 * `Rng` is xoshiro128** (Blackman & Vigna 2018, https://prng.di.unimi.it/) seeded through
 * splitmix32, so a job's rollouts, initialisation and shuffles replay exactly from a seed and a
 * checkpointed `RngState`. `sampleToken` implements greedy, temperature and nucleus (top-p,
 * Holtzman et al. 2020) sampling over one row of logits.
 */

/** JSON-serialisable state of an `Rng` (four uint32 words of xoshiro128**). */
export interface RngState {
  algorithm: "xoshiro128**";
  s: [number, number, number, number];
}

/** Thrown when sampling inputs cannot be used (bad options, no finite logit). */
export class SamplingError extends Error {
  override name = "SamplingError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** One step of splitmix32; returns [output, next state] (uint32). */
function splitmix32(x: number): [number, number] {
  const next = (x + 0x9e3779b9) >>> 0;
  let z = next;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
  return [(z ^ (z >>> 16)) >>> 0, next];
}

const rotl = (x: number, k: number): number => ((x << k) | (x >>> (32 - k))) >>> 0;

/**
 * Deterministic pseudo-random generator (xoshiro128**), seeded via splitmix32. Not cryptographic.
 */
export class Rng {
  #s: Uint32Array;

  /**
   * @param seed any finite number; its integer part modulo 2^32 selects the stream (seeds that
   *   differ mod 2^32 give independent-looking streams).
   * @throws {SamplingError} when `seed` is not finite.
   */
  constructor(seed: number) {
    if (!Number.isFinite(seed)) {
      throw new SamplingError(`Cannot seed Rng as seed must be finite: current value is ${seed}`);
    }
    this.#s = new Uint32Array(4);
    let x = Math.trunc(seed) >>> 0;
    for (let i = 0; i < 4; i++) {
      const [out, next] = splitmix32(x);
      this.#s[i] = out;
      x = next;
    }
    if (this.#s.every((w) => w === 0)) this.#s[0] = 1; // xoshiro's one forbidden state
  }

  /** Next uint32 in [0, 2^32). */
  nextUint32(): number {
    const s = this.#s;
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform float in [0, 1) with 32 random bits. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n) (n ≥ 1, n ≤ 2^32), unbiased by rejection. */
  nextInt(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 4294967296) {
      throw new SamplingError(
        `Cannot draw an integer as n must be in [1, 2^32]: current value is ${n}`,
      );
    }
    const limit = 4294967296 - (4294967296 % n);
    let x = this.nextUint32();
    while (x >= limit) x = this.nextUint32();
    return x % n;
  }

  /** Standard normal draw N(0, 1) by the Box–Muller transform (one value per two uniforms). */
  normal(): number {
    const u1 = 1 - this.next(); // (0, 1]: keeps log finite
    const u2 = this.next();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  /** A copy of the current state (JSON-serialisable), for checkpoints. */
  state(): RngState {
    return { algorithm: "xoshiro128**", s: [this.#s[0], this.#s[1], this.#s[2], this.#s[3]] };
  }

  /**
   * Restores a generator from `state()`; the restored stream continues exactly where it was.
   * @throws {SamplingError} when the state is malformed.
   */
  static fromState(state: RngState): Rng {
    const ok = state?.algorithm === "xoshiro128**" && Array.isArray(state.s) &&
      state.s.length === 4 && state.s.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32) &&
      state.s.some((w) => w !== 0);
    if (!ok) {
      throw new SamplingError(
        `Cannot restore Rng as state must be {algorithm: "xoshiro128**", s: 4 uint32 not all 0}: ` +
          `current value is ${JSON.stringify(state)}`,
      );
    }
    const rng = new Rng(0);
    rng.#s.set(state.s);
    return rng;
  }

  /**
   * Sets this generator's state to `state` (from `state()`, e.g. of a copy advanced on another
   * thread): it continues exactly where that stream was.
   * @throws {SamplingError} when the state is malformed.
   */
  restore(state: RngState): void {
    this.#s.set(Rng.fromState(state).#s);
  }
}

/** Options of `sampleToken`. */
export interface SampleOptions {
  /** Softmax temperature (> 0); ≤ 0 means greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]: keep the smallest set of most likely tokens whose mass ≥ topP. */
  topP: number;
  /** Arg-max (lowest index on ties); ignores temperature, topP and rng. */
  greedy: boolean;
}

/**
 * Index of the largest logit, lowest index on ties; NaN entries are skipped.
 * @throws {SamplingError} when `logits` is empty or all NaN.
 */
export function argMax(logits: Float32Array): number {
  let best = -1;
  let bestValue = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i];
    if (v > bestValue || (best === -1 && v === -Infinity)) {
      best = i;
      bestValue = v;
    }
  }
  if (best === -1) {
    throw new SamplingError(
      `Cannot take the arg-max as logits must hold a number: current length is ${logits.length}`,
    );
  }
  return best;
}

/**
 * Draws one token id from a row of logits `(V,)` (float32, unnormalised log-probabilities).
 *
 * greedy (or temperature ≤ 0) → arg-max; otherwise p = softmax(logits / temperature), restricted
 * to the nucleus (tokens sorted by p descending, ties by lower id, the shortest prefix with mass
 * ≥ topP, at least one token), renormalised, and sampled with one `rng.next()` draw.
 * `-Infinity` logits are masked tokens and never drawn.
 * @throws {SamplingError} when topP is outside (0, 1], or no logit is finite.
 */
export function sampleToken(logits: Float32Array, opts: SampleOptions, rng: Rng): number {
  if (opts.greedy || opts.temperature <= 0) return argMax(logits);
  if (!(opts.topP > 0 && opts.topP <= 1)) {
    throw new SamplingError(
      `Cannot sample as topP must be in (0, 1]: current value is ${opts.topP}`,
    );
  }
  const v = logits.length;
  let max = -Infinity;
  for (let i = 0; i < v; i++) if (logits[i] > max) max = logits[i];
  if (!Number.isFinite(max)) {
    throw new SamplingError(`Cannot sample as some logit must be finite: max logit is ${max}`);
  }
  const probs = new Float64Array(v); // (V,) unnormalised softmax weights
  let total = 0;
  for (let i = 0; i < v; i++) {
    const w = Math.exp((logits[i] - max) / opts.temperature); // NaN logits give NaN: dropped below
    probs[i] = w > 0 ? w : 0;
    total += probs[i];
  }
  if (opts.topP >= 1) return drawFrom(probs, total, rng);

  const order = Array.from({ length: v }, (_, i) => i).filter((i) => probs[i] > 0);
  order.sort((a, b) => probs[b] - probs[a] || a - b);
  const nucleus = new Float64Array(v);
  let kept = 0;
  for (const i of order) {
    nucleus[i] = probs[i];
    kept += probs[i];
    if (kept >= opts.topP * total) break;
  }
  return drawFrom(nucleus, kept, rng);
}

/** Inverse-CDF draw from non-negative weights summing to `total` (> 0). */
function drawFrom(weights: Float64Array, total: number, rng: Rng): number {
  const target = rng.next() * total;
  let acc = 0;
  let last = -1;
  for (let i = 0; i < weights.length; i++) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last = i;
    if (target < acc) return i;
  }
  return last; // rounding left target ≥ acc: the last token with weight
}

/**
 * A per-sequence decoding constraint (structured generation, e.g. `JsonSequenceConstraint`):
 * before each draw it masks the sequence's row of logits, after it learns the drawn token.
 * Generation without one does no extra work.
 */
export interface TokenConstraint {
  /**
   * Sets to −Infinity, in place, the logits (V,) of the tokens that may not come next, given
   * `remaining` new tokens left in the sequence's budget (this one included, ≥ 1). At least one
   * token stays finite. Throws when no token can be allowed.
   */
  maskLogits(logits: Float32Array, remaining: number): void;
  /** Records the drawn token; true when the constrained text is complete (the sequence stops). */
  accept(token: number): boolean;
  /**
   * Jump-forward decoding (optional): the token ids that come next whatever the model would
   * prefer, because the constraint leaves only one continuation text there (e.g. the rest of a
   * fixed phrase), given `remaining` new tokens left (≥ 0). The caller appends them without a
   * draw, passing each to `accept` in order; [] when the next token is a real choice. They must
   * leave the constrained text completable within `remaining` minus their number. Without this
   * method every token is drawn.
   */
  forcedTokens?(remaining: number): number[];
}

/**
 * Where the earliest stop string starts in `text`, or -1 when none occurs. Empty stop strings
 * are ignored. Used to cut generations at e.g. `</action>`.
 */
export function stopStringHit(text: string, stops: string[]): number {
  let hit = -1;
  for (const stop of stops) {
    if (stop.length === 0) continue;
    const at = text.indexOf(stop);
    if (at !== -1 && (hit === -1 || at < hit)) hit = at;
  }
  return hit;
}

/**
 * The state a choice's random stream starts from: choice `i` (0, 1, …) of a generation seeded
 * with `seed` starts at `(seed · 0x9e3779b1 + i · 0x85ebca6b) >>> 0`, the products and the sum
 * in float64 (for a 32-bit seed the product exceeds 2^53 and its low bits are rounded away
 * before `>>> 0`; kept so, as every recorded run's draws depend on it). The one formula of the
 * trainer's `generate` (generate.ts), the inference server's decode loop
 * (workers/serve/engine.ts) and the remote rollout's request seeds
 * (workers/seed/remote_rollout.ts).
 */
export function choiceSeed(seed: number, i: number): number {
  return (seed * 0x9e3779b1 + i * 0x85ebca6b) >>> 0;
}

/**
 * The random stream of choice `i` of a generation seeded with `seed`: `Rng(choiceSeed(seed, i))`.
 * Equal seeds and indices give equal draws in `generate` and on the server, whichever other
 * sequences share the batch.
 */
export function choiceRng(seed: number, i: number): Rng {
  return new Rng(choiceSeed(seed, i));
}
