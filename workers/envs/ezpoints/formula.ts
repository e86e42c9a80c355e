/**
 * EZPoints formulas: tokens, exact rational arithmetic, parsing and evaluation, and the tokens
 * admissible after a prefix.
 *
 * Grammar (usual precedence, left-associative, no unary minus):
 * `expr := term (("+" | "-") term)*`, `term := factor (("*" | "/") factor)*`,
 * `factor := number | "(" expr ")"`, numbers `1`…`10`. Values are fractions of integers, so
 * `(3 + 3 / 7) * 7` is exactly 24 and `12` is only reached exactly.
 */

/** Number tokens (card values; A is 1, J, Q and K are 10). */
export const NUMBER_TOKENS: readonly string[] = Array.from({ length: 10 }, (_, i) => String(i + 1));
/** Operator tokens. */
export const OPERATOR_TOKENS = ["+", "-", "*", "/"] as const;
/** The token that ends the episode and submits the formula. */
export const SUBMIT_TOKEN = "=";
/** Every action of EZPoints, in the order admissible lists use. */
export const ALL_TOKENS: readonly string[] = [
  ...NUMBER_TOKENS,
  ...OPERATOR_TOKENS,
  "(",
  ")",
  SUBMIT_TOKEN,
];

/** An exact rational `n / d` in lowest terms with `d > 0`. */
export interface Fraction {
  n: number;
  d: number;
}

function gcd(a: number, b: number): number {
  a = Math.abs(a);
  b = Math.abs(b);
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** `n / d` in lowest terms (d ≠ 0). */
export function fraction(n: number, d = 1): Fraction {
  const g = gcd(n, d) || 1;
  const sign = d < 0 ? -1 : 1;
  return { n: (sign * n) / g, d: (sign * d) / g };
}

/** `a op b`; `null` for division by zero. */
export function applyOperator(op: string, a: Fraction, b: Fraction): Fraction | null {
  switch (op) {
    case "+":
      return fraction(a.n * b.d + b.n * a.d, a.d * b.d);
    case "-":
      return fraction(a.n * b.d - b.n * a.d, a.d * b.d);
    case "*":
      return fraction(a.n * b.n, a.d * b.d);
    case "/":
      return b.n === 0 ? null : fraction(a.n * b.d, a.d * b.n);
    default:
      throw new RangeError(`Cannot apply operator as it must be + - * /: current value is ${op}`);
  }
}

/** `7`, `-3` or `7/2`. */
export function fractionText(f: Fraction): string {
  return f.d === 1 ? String(f.n) : `${f.n}/${f.d}`;
}

/** Why a formula has no value, in the order {@link evaluateFormula} checks. */
export type FormulaErrorKind =
  | "unknown_token"
  | "number_not_on_cards"
  | "number_reused"
  | "empty"
  | "unbalanced_parentheses"
  | "syntax"
  | "cards_unused"
  | "division_by_zero";

/** The outcome of {@link evaluateFormula}. */
export type FormulaResult =
  | { ok: true; value: Fraction }
  | { ok: false; error: FormulaErrorKind; token?: string };

/** Thrown inside the parser; turned into a {@link FormulaResult}. */
class FormulaFailure extends Error {
  constructor(readonly kind: FormulaErrorKind, readonly token?: string) {
    super(kind);
  }
}

/** Counts of each value in `values`. */
function countsOf(values: readonly number[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

/**
 * The exact value of `tokens` (without the final `=`) played with cards of `cardValues`.
 * Checks, in order: every token is an EZPoints token other than `=`; every number is on a card
 * and used at most as often as cards show it; the formula is not empty; parentheses balance;
 * the grammar of the module doc holds; every card is used; no division by zero.
 */
export function evaluateFormula(
  tokens: readonly string[],
  cardValues: readonly number[],
): FormulaResult {
  const available = countsOf(cardValues);
  const used = new Map<number, number>();
  let depth = 0;
  let unbalanced = false;
  for (const t of tokens) {
    if (t === SUBMIT_TOKEN || !ALL_TOKENS.includes(t)) {
      return { ok: false, error: "unknown_token", token: t };
    }
    if (NUMBER_TOKENS.includes(t)) {
      const v = Number(t);
      if (!available.has(v)) return { ok: false, error: "number_not_on_cards", token: t };
      used.set(v, (used.get(v) ?? 0) + 1);
      if (used.get(v)! > available.get(v)!) return { ok: false, error: "number_reused", token: t };
    }
    if (t === "(") depth++;
    if (t === ")" && --depth < 0) unbalanced = true;
  }
  if (tokens.length === 0) return { ok: false, error: "empty" };
  if (unbalanced || depth !== 0) return { ok: false, error: "unbalanced_parentheses" };
  let value: Fraction;
  try {
    const parser = new Parser(tokens);
    const tree = parser.expr();
    if (!parser.atEnd()) throw new FormulaFailure("syntax", parser.peek());
    const usedCount = [...used.values()].reduce((a, b) => a + b, 0);
    if (usedCount !== cardValues.length) return { ok: false, error: "cards_unused" };
    value = tree();
  } catch (e) {
    if (e instanceof FormulaFailure) return { ok: false, error: e.kind, token: e.token };
    throw e;
  }
  return { ok: true, value };
}

/** Recursive-descent parser; each rule returns a thunk so syntax is checked before arithmetic. */
class Parser {
  #i = 0;
  constructor(readonly tokens: readonly string[]) {}

  atEnd(): boolean {
    return this.#i >= this.tokens.length;
  }

  peek(): string | undefined {
    return this.tokens[this.#i];
  }

  expr(): () => Fraction {
    let left = this.term();
    while (this.peek() === "+" || this.peek() === "-") {
      const op = this.tokens[this.#i++];
      const l = left;
      const r = this.term();
      left = () => binary(op, l(), r());
    }
    return left;
  }

  term(): () => Fraction {
    let left = this.factor();
    while (this.peek() === "*" || this.peek() === "/") {
      const op = this.tokens[this.#i++];
      const l = left;
      const r = this.factor();
      left = () => binary(op, l(), r());
    }
    return left;
  }

  factor(): () => Fraction {
    const t = this.peek();
    if (t !== undefined && NUMBER_TOKENS.includes(t)) {
      this.#i++;
      const value = fraction(Number(t));
      return () => value;
    }
    if (t === "(") {
      this.#i++;
      const inner = this.expr();
      if (this.peek() !== ")") throw new FormulaFailure("syntax", this.peek());
      this.#i++;
      return inner;
    }
    throw new FormulaFailure("syntax", t);
  }
}

function binary(op: string, a: Fraction, b: Fraction): Fraction {
  const out = applyOperator(op, a, b);
  if (out === null) throw new FormulaFailure("division_by_zero");
  return out;
}

/**
 * The tokens admissible after the prefix `tokens` (assumed built from admissible tokens) with
 * cards of `cardValues`, in {@link ALL_TOKENS} order:
 * - where an operand is due (start, after an operator or `(`): each value not yet used up, and
 *   `(` when at least two numbers are left and fewer than `cards − 1` parentheses are open;
 * - after a number or `)`: the operators when a number is left, and `)` when one is open;
 * - `=` always (it submits whatever the formula is).
 * Every admissible prefix can still be completed to a formula that uses every card.
 */
export function admissibleTokens(
  tokens: readonly string[],
  cardValues: readonly number[],
): string[] {
  const left = countsOf(cardValues);
  let depth = 0;
  for (const t of tokens) {
    if (NUMBER_TOKENS.includes(t)) left.set(Number(t), (left.get(Number(t)) ?? 0) - 1);
    else if (t === "(") depth++;
    else if (t === ")") depth--;
  }
  const remaining = [...left.values()].reduce((a, b) => a + Math.max(0, b), 0);
  const last = tokens[tokens.length - 1];
  const operandDue = last === undefined || last === "(" ||
    (OPERATOR_TOKENS as readonly string[]).includes(last);
  const out: string[] = [];
  if (operandDue) {
    for (const t of NUMBER_TOKENS) if ((left.get(Number(t)) ?? 0) > 0) out.push(t);
    if (remaining >= 2 && depth < cardValues.length - 1) out.push("(");
  } else {
    if (remaining > 0) out.push(...OPERATOR_TOKENS);
    if (depth > 0) out.push(")");
  }
  out.push(SUBMIT_TOKEN);
  return out;
}

/** The formula as shown to the agent: tokens joined by spaces, `(empty)` when there are none. */
export function formulaText(tokens: readonly string[]): string {
  return tokens.length === 0 ? "(empty)" : tokens.join(" ");
}

/** Tokens of a formula shown by {@link formulaText}. */
export function tokensOfFormulaText(text: string): string[] {
  const trimmed = text.trim();
  return trimmed === "(empty)" || trimmed === "" ? [] : trimmed.split(/\s+/);
}

/** Why a token is not admissible after a prefix (see {@link whyInadmissible}). */
export type InadmissibleReason =
  | "unknown_token"
  | "number_not_on_cards"
  | "number_reused"
  | "misplaced";

/**
 * Why `token` is not in {@link admissibleTokens} after `prefix`: not an EZPoints token at all, a
 * number on no card, a number whose cards are used up, or a token that cannot stand here
 * (`misplaced`: an operator where a number is due, `)` with none open, …). `null` when it is
 * admissible.
 */
export function whyInadmissible(
  prefix: readonly string[],
  token: string,
  cardValues: readonly number[],
): InadmissibleReason | null {
  if (admissibleTokens(prefix, cardValues).includes(token)) return null;
  if (!ALL_TOKENS.includes(token)) return "unknown_token";
  if (NUMBER_TOKENS.includes(token)) {
    const v = Number(token);
    if (!cardValues.includes(v)) return "number_not_on_cards";
    const used = prefix.filter((t) => t === token).length;
    if (used >= cardValues.filter((c) => c === v).length) return "number_reused";
  }
  return "misplaced";
}
