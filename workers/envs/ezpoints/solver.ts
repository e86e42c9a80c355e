/**
 * EZPoints solvers: whether card values can make the target at all (the classic pairwise search
 * of the 24 game over exact fractions), the formulas that do (the same search, writing tokens with
 * minimal parentheses), and a completion of a given prefix.
 */
import {
  admissibleTokens,
  applyOperator,
  evaluateFormula,
  type Fraction,
  fraction,
  SUBMIT_TOKEN,
} from "./formula.ts";

/** The EZPoints target (RL4VLM's gym-cards EZPoints uses 12). */
export const TARGET = 12;

/**
 * True when some formula using each of `values` exactly once, with + − × ÷ and parentheses,
 * equals `target` exactly: whether {@link solutions} finds a first formula (the pairwise search).
 */
export function isSolvable(values: readonly number[], target = TARGET): boolean {
  return !solutions(values, target).next().done;
}

/** An expression built by the solver: its value, its tokens and its precedence. */
interface Built {
  value: Fraction;
  tokens: string[];
  /** 3 for a number, 2 for a product or quotient, 1 for a sum or difference. */
  prec: number;
}

const wrap = (e: Built, need: boolean): string[] => need ? ["(", ...e.tokens, ")"] : e.tokens;

/** `a op b` with only the parentheses the grammar needs; `null` for division by zero. */
function combine(op: string, a: Built, b: Built): Built | null {
  const value = applyOperator(op, a.value, b.value);
  if (value === null) return null;
  switch (op) {
    case "+":
      return { value, tokens: [...a.tokens, "+", ...b.tokens], prec: 1 };
    case "-":
      return { value, tokens: [...a.tokens, "-", ...wrap(b, b.prec === 1)], prec: 1 };
    case "*":
      return { value, tokens: [...wrap(a, a.prec === 1), "*", ...wrap(b, b.prec === 1)], prec: 2 };
    default:
      return { value, tokens: [...wrap(a, a.prec === 1), "/", ...wrap(b, b.prec < 3)], prec: 2 };
  }
}

/**
 * Every formula (tokens, without `=`) using each of `values` once that equals `target`, with
 * minimal parentheses, plainest first: values ascending, pairs combined in order with
 * + × − ÷. The same formula may come more than once (from different pairings).
 */
export function* solutions(values: readonly number[], target = TARGET): Generator<string[]> {
  const start = [...values].sort((a, b) => a - b).map((v): Built => ({
    value: fraction(v),
    tokens: [String(v)],
    prec: 3,
  }));
  yield* solve(start, target);
}

function* solve(items: Built[], target: number): Generator<string[]> {
  if (items.length === 1) {
    if (items[0].value.d === 1 && items[0].value.n === target) yield items[0].tokens;
    return;
  }
  for (let i = 0; i < items.length; i++) {
    for (let j = i + 1; j < items.length; j++) {
      const rest = items.filter((_, k) => k !== i && k !== j);
      const a = items[i];
      const b = items[j];
      const candidates = [
        combine("+", a, b),
        combine("*", a, b),
        combine("-", a, b),
        combine("-", b, a),
        combine("/", a, b),
        combine("/", b, a),
      ];
      for (const c of candidates) if (c !== null) yield* solve([...rest, c], target);
    }
  }
}

/** Search bound of the depth-first fallback of {@link completeFormula} (formulas evaluated). */
export const MAX_FORMULAS_TRIED = 200_000;

/**
 * The tokens that, appended to `prefix`, give a formula using every card of `values` once and
 * equal to `target` (without the final `=`); `[]` when `prefix` already is one; `null` when no
 * completion exists (or none is found within {@link MAX_FORMULAS_TRIED}). First looks for a
 * formula of {@link solutions} that starts with `prefix` (so from an empty prefix it writes the
 * plainest formula, e.g. `3 * 4`); else searches depth-first over the admissible tokens, which
 * also finds completions of prefixes with extra parentheses.
 */
export function completeFormula(
  prefix: readonly string[],
  values: readonly number[],
  target = TARGET,
): string[] | null {
  for (const formula of solutions(values, target)) {
    if (formula.length >= prefix.length && prefix.every((t, i) => formula[i] === t)) {
      return formula.slice(prefix.length);
    }
  }
  let tried = 0;
  const tokens = [...prefix];
  const dfs = (): boolean => {
    const next = admissibleTokens(tokens, values).filter((t) => t !== SUBMIT_TOKEN);
    if (next.length === 0) {
      tried++;
      const r = evaluateFormula(tokens, values);
      return r.ok && r.value.d === 1 && r.value.n === target;
    }
    for (const t of next) {
      if (tried >= MAX_FORMULAS_TRIED) return false;
      tokens.push(t);
      if (dfs()) return true;
      tokens.pop();
    }
    return false;
  };
  return dfs() ? tokens.slice(prefix.length) : null;
}
