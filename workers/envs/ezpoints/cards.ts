/**
 * EZPoints cards and hands: ranks, suits, values, the solvable rank combinations and how they
 * are split between training and held-out tasks.
 *
 * A hand is `cards` playing cards; its rank combination is the sorted multiset of ranks (suits
 * and order ignored). Only solvable combinations are ever dealt. The combinations are split once,
 * deterministically, per number of cards: about 20% (at least one) are held out for
 * `test_unseen` and never dealt in `train` or `test_seen`; they are chosen in the order of a
 * fixed hash of the combination, skipping any whose removal would leave a rank, or a family
 * (see {@link familyOf}), that no training combination shows — held-out tasks test new
 * combinations of known cards and known kinds of formula, not unknown cards or operations.
 * With 2 cards (the default) only `2 6` (2 × 6) can be held out (each other combination is the
 * only one showing some rank, or `3 4` would be the last product), so `test_unseen` deals 2 and 6
 * and training never does; 3 cards hold out 30 of 150 combinations, 4 cards 309 of 1543.
 */
import { hash32, Rng } from "../_rng.ts";
import { isSolvable } from "./solver.ts";
import type { Split } from "../types.ts";

/** Cards per hand the game deals (option `cards`); observations with other counts are refused. */
export const HAND_SIZE = { min: 2, max: 4 } as const;

/** Card suits; hearts and diamonds are red, spades and clubs black. */
export const SUITS = ["hearts", "diamonds", "spades", "clubs"] as const;
/** One suit. */
export type Suit = typeof SUITS[number];

/** Ranks 1 (ace) … 13 (king). */
export type Rank = number;

/** The rank as printed on the card face. */
export function rankSymbol(rank: Rank): string {
  return rank === 1
    ? "A"
    : rank === 11
    ? "J"
    : rank === 12
    ? "Q"
    : rank === 13
    ? "K"
    : String(rank);
}

/** The rank as a word in observation texts (`ace`, `2`…`10`, `jack`, `queen`, `king`). */
export function rankName(rank: Rank): string {
  return rank === 1
    ? "ace"
    : rank === 11
    ? "jack"
    : rank === 12
    ? "queen"
    : rank === 13
    ? "king"
    : String(rank);
}

/** Every rank word, for the vocabulary. */
export const RANK_NAMES: readonly string[] = Array.from({ length: 13 }, (_, i) => rankName(i + 1));

/** The number a card stands for: its rank, with J, Q and K counting as 10 (A is 1). */
export function cardValue(rank: Rank): number {
  return Math.min(rank, 10);
}

/** One playing card. */
export interface Card {
  rank: Rank;
  suit: Suit;
}

/** `5 of hearts`, `king of spades`. */
export function cardName(card: Card): string {
  return `${rankName(card.rank)} of ${card.suit}`;
}

/** Inverse of {@link cardName}; `null` for anything else. */
export function cardFromName(name: string): Card | null {
  const m = name.trim().match(/^(\w+) of (\w+)$/);
  if (m === null) return null;
  const rank = RANK_NAMES.indexOf(m[1]) + 1;
  const suit = SUITS.find((s) => s === m[2]);
  return rank >= 1 && suit !== undefined ? { rank, suit } : null;
}

/** Task families: how the card values reach 12 most simply. */
export const FAMILIES = ["sum", "product", "mixed"] as const;
/** One family. */
export type Family = typeof FAMILIES[number];

/** `sum` when the values add up to 12, else `product` when they multiply to 12, else `mixed`. */
export function familyOf(values: readonly number[]): Family {
  if (values.reduce((a, b) => a + b, 0) === 12) return "sum";
  if (values.reduce((a, b) => a * b, 1) === 12) return "product";
  return "mixed";
}

/** Key of a rank combination: ranks ascending, joined by `-` (e.g. `2-12`). */
export function comboKey(ranks: readonly Rank[]): string {
  return [...ranks].sort((a, b) => a - b).join("-");
}

/** Rank combinations of one hand size, split into training and held-out ones. */
export interface ComboSplit {
  /** Solvable combinations dealt in `train` and `test_seen` (ranks ascending each). */
  train: Rank[][];
  /** Solvable combinations dealt only in `test_unseen`. */
  unseen: Rank[][];
}

const splitCache = new Map<number, ComboSplit>();

/** Every multiset of `k` ranks, ranks ascending within each, in lexicographic order. */
function rankMultisets(k: number, from = 1): Rank[][] {
  if (k === 0) return [[]];
  const out: Rank[][] = [];
  for (let r = from; r <= 13; r++) {
    for (const rest of rankMultisets(k - 1, r)) out.push([r, ...rest]);
  }
  return out;
}

/** The split of solvable rank combinations for hands of `cards` cards (cached). */
export function comboSplit(cards: number): ComboSplit {
  const cached = splitCache.get(cards);
  if (cached) return cached;
  const solvableByValues = new Map<string, boolean>();
  const solvable = rankMultisets(cards).filter((ranks) => {
    const values = ranks.map(cardValue);
    const key = values.join(",");
    if (!solvableByValues.has(key)) solvableByValues.set(key, isSolvable(values));
    return solvableByValues.get(key)!;
  });
  // Training combinations showing each rank (`r3`) and each family (`sum`).
  const shown = new Map<string, number>();
  const featuresOf = (ranks: Rank[]) => [
    ...new Set(ranks.map((r) => `r${r}`)),
    familyOf(ranks.map(cardValue)),
  ];
  for (const ranks of solvable) {
    for (const f of featuresOf(ranks)) shown.set(f, (shown.get(f) ?? 0) + 1);
  }
  const quota = Math.max(1, Math.round(solvable.length * 0.2));
  const byHash = [...solvable].sort((a, b) =>
    hash32(`ezpoints/${comboKey(a)}`) - hash32(`ezpoints/${comboKey(b)}`)
  );
  const held = new Set<string>();
  for (const ranks of byHash) {
    if (held.size >= quota) break;
    const features = featuresOf(ranks);
    if (features.some((f) => shown.get(f)! < 2)) continue;
    for (const f of features) shown.set(f, shown.get(f)! - 1);
    held.add(comboKey(ranks));
  }
  const split = {
    train: solvable.filter((r) => !held.has(comboKey(r))),
    unseen: solvable.filter((r) => held.has(comboKey(r))),
  };
  splitCache.set(cards, split);
  return split;
}

/**
 * The hand of a task: a rank combination drawn uniformly from those of its split (`train` and
 * `test_seen` the training ones, `test_unseen` the held-out ones), distinct suits for equal
 * ranks (one deck), in random order. A pure function of `seed`, `split` and `cards`.
 */
export function dealHand(seed: number, split: Split, cards: number): Card[] {
  const combos = comboSplit(cards);
  const rng = new Rng(seed);
  const ranks = rng.pick(split === "test_unseen" ? combos.unseen : combos.train);
  const suitsLeft = new Map<Rank, Suit[]>();
  const hand = ranks.map((rank) => {
    let left = suitsLeft.get(rank);
    if (left === undefined) {
      left = rng.shuffle(SUITS);
      suitsLeft.set(rank, left);
    }
    return { rank, suit: left.pop()! };
  });
  return rng.shuffle(hand);
}
