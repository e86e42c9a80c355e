/**
 * The order of an A/B measurement: A B B A (an "ABBA" design), so that load drifting steadily
 * during a row (a neighbour's job starting, the CPU warming up) adds as much to A's two passes as
 * to B's, where measuring A then B would give all of it to B. Each side is then measured twice,
 * and its two passes are pooled.
 */

/**
 * The order in which to measure `sides`: them in order, then in reverse (A B → A B B A); one
 * side alone is measured once. Each side appears twice when there are two or more.
 */
export function abbaOrder<T>(sides: readonly T[]): T[] {
  return sides.length > 1 ? [...sides, ...[...sides].reverse()] : [...sides];
}
