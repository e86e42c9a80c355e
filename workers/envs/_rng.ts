/**
 * Deterministic randomness shared by the built-in environments' generators: seed derivation
 * (string and number parts) and a small seeded PRNG, so the same seed gives the same tasks,
 * worlds and catalogs on every machine.
 *
 * `mix32` is the 32-bit finaliser of MurmurHash3 (Appleby); `hash32` is 32-bit FNV-1a followed
 * by that finaliser; `Rng` is mulberry32 (Ettinger). All are exact in JavaScript integer
 * arithmetic. Changing any of them changes every generated task: the environments' determinism
 * tests pin their outputs.
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

/** 32-bit FNV-1a hash of `text` (UTF-16 code units) with the murmur3 finaliser; a uint32. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return mix32(h);
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

/** Seeded PRNG (mulberry32, period 2^32); every draw is a pure function of the seed and count. */
export class Rng {
  #state: number;

  /** @param seed any integer; only its low 32 bits are used. */
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

  /** A float in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** An integer in [lo, hi] (both inclusive). */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  /** `k` distinct elements (or all when fewer), in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    return this.shuffle(items).slice(0, k);
  }
}
