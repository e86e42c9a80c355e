/**
 * Small deterministic random numbers for task generation: a seed mixer and a uint32 generator.
 *
 * `mix32` is the 32-bit finaliser of MurmurHash3 (Appleby), `Rng` is mulberry32 (Ettinger):
 * both are exact in JavaScript integer arithmetic, so the same seed gives the same tasks on
 * every machine.
 */

/** MurmurHash3's fmix32: a bijective avalanche of one uint32. */
export function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** Combines uint32 parts and string parts into one uint32 seed (order-sensitive). */
export function seedOf(...parts: (number | string)[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    if (typeof part === "number") {
      h = mix32(h ^ mix32(part >>> 0));
    } else {
      for (let i = 0; i < part.length; i++) h = mix32(h ^ part.charCodeAt(i));
      h = mix32(h ^ part.length);
    }
  }
  return h >>> 0;
}

/** mulberry32: a fast 32-bit generator; period 2^32, fine for procedural generation. */
export class Rng {
  #state: number;

  /** @param seed any uint32. */
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Next uint32. */
  nextU32(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A uniformly chosen element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
}
