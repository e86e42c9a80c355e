/**
 * Seeds of a job's random streams, all derived from its `random_seed` (one per use, so uses never
 * share a stream and a job is reproducible from its spec alone).
 */

/** Uses of {@link derivedSeed}. */
export const SEED_USE = {
  init: 0,
  warmupPolicy: 1,
  warmupAnalyzer: 2,
  eval: 3,
  trainer: 4,
  lora: 5,
  /** The held-out tasks of the warm-up's success checks. */
  warmupCheck: 6,
  /** The tasks and sampling of the skill check after the warm-up. */
  skillCheck: 7,
} as const;

/** A uint32 seed for `use` derived from `randomSeed` (multiplicative hashing, 32-bit). */
export function derivedSeed(randomSeed: number, use: number): number {
  return (Math.imul(randomSeed ^ 0x5eed, 0x9e3779b1) + Math.imul(use + 1, 0x85ebca6b)) >>> 0;
}
