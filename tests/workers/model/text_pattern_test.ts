import assert from "node:assert/strict";
import {
  compileTextPattern,
  NO_STATE,
  Rng,
  type TextPattern,
  TextPatternError,
} from "../../../workers/model/mod.ts";

/** An independent oracle: the pattern as a JavaScript regular expression (whole match). */
function regexSource(p: TextPattern): string {
  if (typeof p === "string") return p.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  if ("seq" in p) return p.seq.map(regexSource).join("");
  if ("oneOf" in p) return `(?:${p.oneOf.map(regexSource).join("|")})`;
  const item = regexSource(p.repeat);
  const sep = p.separator === undefined ? "" : regexSource(p.separator);
  const body = `(?:${item}(?:${sep}${item})*)`;
  return p.min === 0 ? `${body}?` : body;
}

const PUSHES: TextPattern = {
  seq: [
    "Push it ",
    { repeat: { oneOf: ["up", "down", "left", "right"] }, separator: " then " },
    { oneOf: [".", "; done."] },
  ],
};

Deno.test("a compiled pattern accepts its sentences and their prefixes, and nothing else", () => {
  const dfa = compileTextPattern(PUSHES);
  assert.ok(dfa.matches("Push it up."));
  assert.ok(dfa.matches("Push it left then left then down; done."));
  assert.ok(!dfa.matches("Push it up"), "a prefix is not a sentence");
  assert.ok(dfa.isPrefix("Push it up then l"));
  assert.ok(!dfa.isPrefix("Push it up then then"));
  assert.ok(!dfa.matches("Push it ."), "repeat needs one item by default");
  assert.equal(dfa.shortest(), "Push it up.");
  assert.equal(dfa.distance[0], "Push it up.".length);
  assert.equal(dfa.walk("Push it sideways"), NO_STATE);
});

Deno.test("min 0 makes a repetition optional, and multi-byte text is matched by its UTF-8 bytes", () => {
  const dfa = compileTextPattern({
    seq: ["a", { repeat: "é", min: 0, separator: "·" }, "!"],
  });
  for (const text of ["a!", "aé!", "aé·é·é!"]) assert.ok(dfa.matches(text), text);
  for (const text of ["aéé!", "a·!", "a"]) assert.ok(!dfa.matches(text), text);
  assert.equal(dfa.shortest(), "a!");
});

Deno.test("random walks over the automaton write exactly the sentences the regular expression accepts", () => {
  const pattern: TextPattern = {
    oneOf: [
      PUSHES,
      { seq: ["Never push ", { oneOf: ["the box", "each box", "the boxes"] }, " into a corner."] },
      "Look at the grid before moving.",
      { seq: ["x", { repeat: { oneOf: ["0", "1", "12"] }, min: 0 }, "y"] },
    ],
  };
  const dfa = compileTextPattern(pattern);
  const re = new RegExp(`^${regexSource(pattern)}$`);
  const rng = new Rng(7);
  let sentences = 0;
  for (let walk = 0; walk < 400; walk++) {
    const bytes: number[] = [];
    let s = 0;
    while (true) {
      // every reachable state can still be completed
      assert.ok(dfa.distance[s] >= 0);
      const options = [...dfa.bytesFrom(s)];
      if (dfa.accepting[s] && (options.length === 0 || rng.next() < 0.3)) break;
      assert.ok(options.length > 0, "a non-accepting state has a way on");
      const b = options[Math.floor(rng.next() * options.length)];
      bytes.push(b);
      s = dfa.step(s, b);
    }
    const text = new TextDecoder().decode(Uint8Array.from(bytes));
    assert.ok(re.test(text), text);
    assert.ok(dfa.matches(text));
    sentences++;
  }
  assert.equal(sentences, 400);
  // and texts the expression refuses, the automaton refuses
  for (const text of ["x2y", "Never push a box into a corner.", "Push it up then.", "xy "]) {
    assert.equal(dfa.matches(text), re.test(text), text);
  }
});

Deno.test("the canonical byte of every state leads along a shortest completion", () => {
  const dfa = compileTextPattern(PUSHES);
  for (let s = 0; s < dfa.size; s++) {
    if (dfa.accepting[s]) {
      assert.equal(dfa.canonical[s], -1);
      continue;
    }
    const to = dfa.step(s, dfa.canonical[s]);
    assert.equal(dfa.distance[to], dfa.distance[s] - 1);
  }
});

Deno.test("an empty choice or too many states cannot be compiled", () => {
  assert.throws(() => compileTextPattern({ oneOf: [] }), TextPatternError);
  const many: TextPattern = {
    oneOf: Array.from({ length: 50 }, (_, i) => `sentence number ${i} is long enough, says ${i}`),
  };
  assert.throws(() => compileTextPattern(many, { maxStates: 100 }), /≤ 100 states/);
  assert.ok(compileTextPattern(many).size > 100);
});

Deno.test("a pattern serialises to a short key that differs between patterns", () => {
  const a = compileTextPattern(PUSHES), b = compileTextPattern("Push it up.");
  assert.notEqual(JSON.stringify(a), JSON.stringify(b));
  assert.equal(JSON.stringify(a), JSON.stringify(compileTextPattern(PUSHES)));
  assert.ok(JSON.stringify({ pattern: a }).length < 64);
});

Deno.test("a state with many edges steps by each of its bytes and by no other", () => {
  const letters = [..."qwertyuiopasdfghjklzxcvbnm"];
  const dfa = compileTextPattern({ seq: [{ oneOf: letters }, "!"] });
  assert.deepEqual(
    [...dfa.bytesFrom(0)],
    letters.map((c) => c.charCodeAt(0)).sort((a, b) => a - b),
  );
  for (let b = 0; b < 256; b++) {
    const to = dfa.step(0, b);
    assert.equal(to !== NO_STATE, letters.includes(String.fromCharCode(b)), `byte ${b}`);
    if (to !== NO_STATE) assert.equal(dfa.step(to, 0x21) !== NO_STATE, true);
  }
  assert.ok(dfa.matches("k!") && !dfa.matches("K!") && !dfa.matches("k"));
});
