import assert from "node:assert/strict";
import {
  admissibleTokens,
  evaluateFormula,
  fraction,
  fractionText,
  whyInadmissible,
} from "../../../../workers/envs/ezpoints/formula.ts";
import { completeFormula, isSolvable } from "../../../../workers/envs/ezpoints/solver.ts";

const t = (formula: string) => formula.split(" ");

function valueOf(formula: string, cards: number[]): string {
  const r = evaluateFormula(t(formula), cards);
  assert.ok(r.ok, `${formula}: ${JSON.stringify(r)}`);
  return fractionText(r.value);
}

function errorOf(formula: string, cards: number[]): string | undefined {
  const r = evaluateFormula(formula === "" ? [] : t(formula), cards);
  return r.ok ? undefined : r.error;
}

Deno.test("formulas evaluate exactly with the usual precedence and left associativity", () => {
  assert.equal(valueOf("5 + 7", [5, 7]), "12");
  assert.equal(valueOf("2 + 2 * 5", [2, 2, 5]), "12");
  assert.equal(valueOf("( 2 + 2 ) * 5", [2, 2, 5]), "20");
  assert.equal(valueOf("10 - 4 - 2", [10, 4, 2]), "4");
  assert.equal(valueOf("8 / 4 / 2", [8, 4, 2]), "1");
  assert.equal(valueOf("10 / 4", [10, 4]), "5/2");
  assert.equal(valueOf("( 3 + 3 / 7 ) * 7", [3, 3, 7, 7]), "24");
  assert.equal(valueOf("2 - 6", [2, 6]), "-4");
  assert.deepEqual(fraction(6, -4), { n: -3, d: 2 });
});

Deno.test("division by zero is an error, not Infinity", () => {
  assert.equal(errorOf("5 / ( 3 - 3 )", [5, 3, 3]), "division_by_zero");
  assert.equal(errorOf("( 3 - 3 ) / 5", [5, 3, 3]), undefined);
});

Deno.test("unbalanced parentheses are reported before any arithmetic", () => {
  assert.equal(errorOf("( 5 + 7", [5, 7]), "unbalanced_parentheses");
  assert.equal(errorOf("5 + 7 )", [5, 7]), "unbalanced_parentheses");
  assert.equal(errorOf(") 5 + 7 (", [5, 7]), "unbalanced_parentheses");
});

Deno.test("a number used twice, a number on no card and a non-token are refused", () => {
  assert.equal(errorOf("5 + 5", [5, 7]), "number_reused");
  assert.equal(errorOf("6 + 6", [6, 6]), undefined);
  assert.equal(errorOf("5 + 8", [5, 7]), "number_not_on_cards");
  assert.equal(errorOf("12", [5, 7]), "unknown_token");
  assert.equal(errorOf("5 + 7 =", [5, 7]), "unknown_token");
  assert.equal(errorOf("5 x 7", [5, 7]), "unknown_token");
});

Deno.test("incomplete formulas are syntax errors or leave cards unused", () => {
  assert.equal(errorOf("", [5, 7]), "empty");
  assert.equal(errorOf("5 +", [5, 7]), "syntax");
  assert.equal(errorOf("+ 5 7", [5, 7]), "syntax");
  assert.equal(errorOf("5 7", [5, 7]), "syntax");
  assert.equal(errorOf("( ) 5 + 7", [5, 7]), "syntax");
  assert.equal(errorOf("5", [5, 7]), "cards_unused");
  assert.equal(errorOf("( 5 )", [5, 7]), "cards_unused");
});

Deno.test("admissible tokens follow the grammar, the cards left and the open parentheses", () => {
  assert.deepEqual(admissibleTokens([], [4, 3]), ["3", "4", "(", "="]);
  assert.deepEqual(admissibleTokens(["3"], [4, 3]), ["+", "-", "*", "/", "="]);
  assert.deepEqual(admissibleTokens(t("3 *"), [4, 3]), ["4", "="]);
  assert.deepEqual(admissibleTokens(t("3 * 4"), [4, 3]), ["="]);
  assert.deepEqual(admissibleTokens(["("], [4, 3]), ["3", "4", "="], "2 cards: one ( at most");
  assert.deepEqual(admissibleTokens(t("( 3 + 4"), [4, 3]), [")", "="]);
  assert.deepEqual(admissibleTokens(t("6"), [6, 6]), ["+", "-", "*", "/", "="]);
  assert.deepEqual(admissibleTokens(t("6 +"), [6, 6]), ["6", "="]);
  assert.deepEqual(admissibleTokens(t("( ("), [1, 2, 3, 4]), ["1", "2", "3", "4", "(", "="]);
  assert.deepEqual(admissibleTokens(t("( ( ("), [1, 2, 3, 4]), ["1", "2", "3", "4", "="]);
});

Deno.test("whyInadmissible names the reason a token is refused", () => {
  assert.equal(whyInadmissible([], "3", [3, 4]), null);
  assert.equal(whyInadmissible([], "7", [3, 4]), "number_not_on_cards");
  assert.equal(whyInadmissible(t("3 +"), "3", [3, 4]), "number_reused");
  assert.equal(whyInadmissible([], "+", [3, 4]), "misplaced");
  assert.equal(whyInadmissible(["3"], "4", [3, 4]), "misplaced");
  assert.equal(whyInadmissible(["3"], ")", [3, 4]), "misplaced");
  assert.equal(whyInadmissible([], "plus", [3, 4]), "unknown_token");
});

Deno.test("the solver tells solvable hands from unsolvable ones", () => {
  assert.equal(isSolvable([5, 7]), true);
  assert.equal(isSolvable([3, 4]), true);
  assert.equal(isSolvable([10, 2]), true);
  assert.equal(isSolvable([1, 1]), false);
  assert.equal(isSolvable([3, 8]), false);
  assert.equal(isSolvable([2, 2, 3]), true);
  assert.equal(isSolvable([1, 2, 3]), false);
  assert.equal(isSolvable([1, 1, 1, 1]), false);
  assert.equal(isSolvable([1, 5, 5, 5]), false);
  assert.equal(isSolvable([1, 5, 5, 5], 24), true, "5 * (5 - 1 / 5) = 24 needs fractions");
});

Deno.test("completeFormula finishes a prefix to exactly 12 or says none exists", () => {
  assert.deepEqual(completeFormula(["5"], [5, 7]), ["+", "7"]);
  assert.deepEqual(completeFormula([], [4, 3]), t("3 * 4"));
  assert.equal(completeFormula(t("10 -"), [10, 2]), null);
  assert.deepEqual(completeFormula(t("5 + 7"), [5, 7]), []);
  assert.deepEqual(completeFormula(t("( 5"), [5, 7]), t("+ 7 )"), "a prefix no plain formula has");
  for (
    const cards of [[1, 2, 4], [9, 9, 6], [3, 5, 5, 5], [2, 3, 4, 10], [1, 1, 1, 4], [1, 1, 2, 6]]
  ) {
    const formula = completeFormula([], cards);
    assert.ok(formula !== null, `no formula for ${cards}`);
    const r = evaluateFormula(formula, cards);
    assert.ok(r.ok && r.value.n === 12 && r.value.d === 1, `${formula.join(" ")} for ${cards}`);
  }
});
