/**
 * EZPoints solvers: whether card values can make the target at all (the classic pairwise search
 * of the 24 game over exact fractions), and a formula, token by token, that completes a given
 * prefix (depth-first over the admissible tokens, so it only writes what the episode accepts).
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
 * equals `target` exactly. Repeatedly replaces two numbers by the result of one operation.
 */
export function isSolvable(values: readonly number[], target = TARGET): boolean {
  return search(values.map((v) => fraction(v)), target);
}

function search(nums: Fraction[], target: number): boolean {
  if (nums.length === 1) return nums[0].d === 1 && nums[0].n === target;
  for (let i = 0; i < nums.length; i++) {
    for (let j = i + 1; j < nums.length; j++) {
      const rest = nums.filter((_, k) => k !== i && k !== j);
      const a = nums[i];
      const b = nums[j];
      const results = [
        applyOperator("+", a, b),
        applyOperator("*", a, b),
        applyOperator("-", a, b),
        applyOperator("-", b, a),
        applyOperator("/", a, b),
        applyOperator("/", b, a),
      ];
      for (const r of results) if (r !== null && search([...rest, r], target)) return true;
    }
  }
  return false;
}

/** Search bound of {@link completeFormula} (complete formulas evaluated). */
export const MAX_FORMULAS_TRIED = 200_000;

/**
 * The tokens that, appended to `prefix`, give a formula using every card of `values` once and
 * equal to `target` (without the final `=`); `[]` when `prefix` already is one; `null` when no
 * completion exists (or none is found within {@link MAX_FORMULAS_TRIED}). Tries admissible tokens
 * in their list order (numbers, operators, parentheses), so it prefers the plainest formulas,
 * e.g. `5 + 7` before `5 * …`.
 */
export function completeFormula(
  prefix: readonly string[],
  values: readonly number[],
  target = TARGET,
): string[] | null {
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
