import assert from "node:assert/strict";
import {
  compileTextPattern,
  JsonObjectAutomaton,
  type JsonObjectSchema,
  JsonSchemaError,
  Rng,
  STATE_FIELDS,
} from "../../../workers/model/mod.ts";

const SCHEMA: JsonObjectSchema = {
  fields: [
    { name: "episode_skill", maxUnits: 40, requireAlnum: true },
    { name: "episode_summary", maxUnits: 60 },
  ],
  maxWhitespace: 4,
  forbiddenCodePoints: [0x201c, 0x201d],
};
const utf8 = new TextEncoder();

/** Feeds `text`'s UTF-8 bytes; returns how many were accepted and whether the object closed. */
function run(a: JsonObjectAutomaton, text: string | Uint8Array) {
  const st = new Int32Array(STATE_FIELDS);
  a.init(st, 0);
  const bytes = typeof text === "string" ? utf8.encode(text) : text;
  let n = 0;
  while (n < bytes.length && a.step(st, 0, bytes[n])) n++;
  return { accepted: n, all: n === bytes.length, done: n === bytes.length && a.isDone(st, 0) };
}

Deno.test("every byte prefix of well-formed analysis objects is accepted and only the whole object is done", () => {
  const a = new JsonObjectAutomaton(SCHEMA);
  const objects = [
    JSON.stringify({ episode_skill: "Push boxes onto targets.", episode_summary: "won" }),
    '{"episode_skill": "x", "episode_summary": ""}',
    ' \n{ "episode_skill" :\t"say \\"hi\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9\\uFFFF" , "episode_summary":"é 中 😀 \\u201c"}',
    JSON.stringify({ episode_skill: "naïve “quoted” 9", episode_summary: "tab\there" })
      .replace("“", "\\u201c").replace("”", "\\u201d"),
  ];
  for (const text of objects) {
    const bytes = utf8.encode(text);
    for (let i = 0; i < bytes.length; i++) {
      const r = run(a, bytes.subarray(0, i));
      assert.ok(r.all && !r.done, `prefix ${i} of ${text}`);
    }
    assert.ok(run(a, text).done, text);
    assert.deepEqual(Object.keys(JSON.parse(text)), ["episode_skill", "episode_summary"]);
  }
});

Deno.test("bytes that no accepted object continues with are rejected where they occur", () => {
  const a = new JsonObjectAutomaton(SCHEMA);
  const head = '{"episode_skill":"';
  const rejects: [string | Uint8Array, number][] = [
    ['{"episode_summary":"a","episode_skill":"b"}', 11], // keys out of order: at `u`
    [head + '","episode_summary":""}', head.length], // skill without a letter or digit
    [head + '...","episode_summary":""}', head.length + 3],
    [head + "a\\x", head.length + 2], // unknown escape
    [head + "a\\ud800", head.length + 4], // a \u surrogate, at its 2nd hex digit
    [head + "a\nb", head.length + 1], // raw control character
    [head + "a“", head.length + 3], // forbidden raw curly quote (3 bytes, rejected at the last)
    [head + 'a","episode_summary":""} ', head.length + 24], // nothing after the object
    [head + 'a","episode_summary":""}}', head.length + 24],
    ['{     "episode_skill"', 5], // a 5th whitespace byte in one gap
    [Uint8Array.from([...utf8.encode(head), 0xc0, 0x80]), head.length], // overlong NUL
    [Uint8Array.from([...utf8.encode(head), 0xed, 0xa0, 0x80]), head.length + 1], // surrogate
    [Uint8Array.from([...utf8.encode(head), 0xf4, 0x90]), head.length + 1], // past U+10FFFF
    [Uint8Array.from([...utf8.encode(head), 0xe2, 0x41]), head.length + 1], // truncated char
  ];
  for (const [text, at] of rejects) {
    const r = run(a, text);
    assert.equal(r.all, false, String(text));
    assert.equal(r.accepted, at, `rejected at byte ${r.accepted} of ${text}`);
  }
});

Deno.test("value lengths count UTF-16 units and keep one unit free for the required letter", () => {
  const a = new JsonObjectAutomaton({
    fields: [{ name: "s", maxUnits: 3, requireAlnum: true }, { name: "t", maxUnits: 2 }],
  });
  assert.ok(run(a, '{"s":"abc","t":"de"}').done);
  assert.ok(run(a, '{"s":"..a","t":"😀"}').done); // an astral character is 2 units
  assert.equal(run(a, '{"s":"abcd"').accepted, 9);
  assert.equal(run(a, '{"s":"...').accepted, 8); // the 3rd unit stays free for a letter
  assert.ok(run(a, '{"s":"a😀"').all); // 1 + 2 units fit…
  assert.ok(run(a, '{"s":"a😀","t":"\\u0041x"}').done); // …and an escape is one unit
  assert.equal(run(a, '{"s":"a","t":"😀x').accepted, 18);
});

Deno.test("the canonical completion of any reachable state closes a JSON object of the schema's keys", () => {
  const a = new JsonObjectAutomaton(SCHEMA);
  const st = new Int32Array(2 * STATE_FIELDS), scratch = new Int32Array(STATE_FIELDS);
  // random walks that prefer JSON's special bytes and multi-byte characters
  const alphabet = [
    ...utf8.encode(' \t\n{}":,\\/bfnrtu0123456789abcdefABCDEFxé😀“'),
    ...Array.from({ length: 40 }, (_, i) => 0x80 + i * 3),
  ];
  for (let seed = 0; seed < 300; seed++) {
    const rng = new Rng(seed);
    a.init(st, 0);
    const text: number[] = [];
    for (let n = 0; n < 60 && !a.isDone(st, 0); n++) {
      const b = alphabet[rng.nextInt(alphabet.length)];
      st.copyWithin(STATE_FIELDS, 0, STATE_FIELDS);
      if (a.step(st, STATE_FIELDS, b)) {
        st.copyWithin(0, STATE_FIELDS, 2 * STATE_FIELDS);
        text.push(b);
      }
      const rest = a.completion(st, 0, scratch);
      const whole = new TextDecoder("utf-8", { fatal: true }).decode(
        Uint8Array.from([...text, ...rest]),
      );
      const parsed = JSON.parse(whole);
      assert.deepEqual(Object.keys(parsed), ["episode_skill", "episode_summary"], whole);
      assert.match(parsed.episode_skill, /[\p{L}\p{N}]/u);
      assert.ok(run(a, whole).done, whole);
    }
  }
});

Deno.test("a schema with no field, a quoted key, a zero bound or a bad forbidden code point is refused", () => {
  assert.throws(() => new JsonObjectAutomaton({ fields: [] }), JsonSchemaError);
  assert.throws(
    () => new JsonObjectAutomaton({ fields: [{ name: 'a"b', maxUnits: 4 }] }),
    JsonSchemaError,
  );
  assert.throws(
    () => new JsonObjectAutomaton({ fields: [{ name: "a", maxUnits: 0 }] }),
    JsonSchemaError,
  );
  assert.throws(
    () =>
      new JsonObjectAutomaton({
        fields: [{ name: "a", maxUnits: 4 }],
        forbiddenCodePoints: [0x2000],
      }),
    /low 6 bits/,
  );
});

Deno.test("a field held to a pattern accepts exactly the pattern's sentences, raw and within its byte bound", () => {
  const pattern = compileTextPattern({
    seq: ["Push it ", { repeat: { oneOf: ["up", "left"] }, separator: " then " }, "."],
  });
  const schema: JsonObjectSchema = {
    fields: [{ name: "episode_skill", maxUnits: 30, pattern }, {
      name: "episode_summary",
      maxUnits: 9,
    }],
  };
  const a = new JsonObjectAutomaton(schema);
  const object = (skill: string) => `{"episode_skill": "${skill}", "episode_summary": "x"}`;
  const closes = (text: string) => {
    return run(a, text).done;
  };
  assert.ok(closes(object("Push it up then left.")));
  assert.ok(!closes(object("Push it up then left")), "the quote needs a whole sentence");
  assert.ok(!closes(object("Push it down.")));
  assert.ok(!closes(object("Push it \\u0075p.")), "no escapes inside a pattern value");
  // 30 bytes: "Push it up then up then up." is 27; one more " then up" does not fit
  assert.ok(closes(object("Push it up then up then up.")));
  const long = object("Push it up then up then up then up.");
  assert.equal(
    run(a, long).accepted,
    long.indexOf("Push it") + "Push it up then up then up".length,
  );
  // the canonical completion of a state inside the value finishes the sentence
  const st = new Int32Array(STATE_FIELDS), scratch = new Int32Array(STATE_FIELDS);
  a.init(st, 0);
  for (const b of utf8.encode('{"episode_skill":"Push it l')) assert.ok(a.step(st, 0, b));
  const rest = new TextDecoder().decode(Uint8Array.from(a.completion(st, 0, scratch)));
  assert.equal(rest, 'eft.","episode_summary":""}');
});

Deno.test("a pattern that writes a quote, or whose shortest sentence exceeds the bound, is refused", () => {
  const field = (text: string, maxUnits: number): JsonObjectSchema => ({
    fields: [{ name: "s", maxUnits, pattern: compileTextPattern(text) }],
  });
  assert.throws(() => new JsonObjectAutomaton(field('say "hi"', 20)), /writes byte 34/);
  assert.throws(() => new JsonObjectAutomaton(field("a\\b", 20)), /writes byte 92/);
  assert.throws(() => new JsonObjectAutomaton(field("hello", 4)), /shortest sentence \(5 bytes\)/);
  assert.ok(new JsonObjectAutomaton(field("hello", 5)));
});

Deno.test("a pattern that writes a forbidden code point is refused, since its values are never escaped", () => {
  const schema = (text: string): JsonObjectSchema => ({
    fields: [{ name: "s", maxUnits: 40, pattern: compileTextPattern({ oneOf: ["ok", text] }) }],
    forbiddenCodePoints: [0x201c, 0x201d],
  });
  // the analyzer's parser reads a raw U+201C as `"`, so such a skill would break its object
  assert.throws(() => new JsonObjectAutomaton(schema("say \u201chi")), /writes U\+201C/);
  assert.throws(() => new JsonObjectAutomaton(schema("hi\u201d")), /writes U\+201D/);
  // the same lead byte (E2 80) in another character is fine: “ is E2 80 9C, – is E2 80 93
  assert.ok(new JsonObjectAutomaton(schema("a \u2013 b")));
});

/** The one byte `step` accepts from the state at `o` (found by trying all 256), else -1. */
function onlyByte(a: JsonObjectAutomaton, st: Int32Array, o: number, scratch: Int32Array) {
  let only = -1;
  for (let b = 0; b < 256; b++) {
    scratch.set(st.subarray(o, o + STATE_FIELDS));
    if (!a.step(scratch, 0, b)) continue;
    if (only >= 0) return -1;
    only = b;
  }
  return only;
}

Deno.test("forcedNext is the one byte step accepts, and -1 where it accepts several or none", () => {
  const pattern = compileTextPattern({
    seq: [
      "Walk behind ",
      { oneOf: ["the box", "each box"] },
      ", then push it ",
      { repeat: { oneOf: ["up", "left", "down"] }, separator: " then " },
      { oneOf: [".", "; never push a box."] },
    ],
  });
  const schemas: JsonObjectSchema[] = [
    SCHEMA,
    { ...SCHEMA, maxWhitespace: 0 },
    {
      fields: [{ name: "s", maxUnits: 48, pattern }, {
        name: "t",
        maxUnits: 3,
        requireAlnum: true,
      }],
      maxWhitespace: 0,
    },
    { fields: [{ name: "s", maxUnits: 48, pattern }], maxWhitespace: 1 },
  ];
  const alphabet = [...utf8.encode(' \t{}":,\\ubtfnrxé0123456789aeinoprstuwy.;'), 0x80, 0xa9];
  let forced = 0, open = 0;
  for (const schema of schemas) {
    const a = new JsonObjectAutomaton(schema);
    const st = new Int32Array(STATE_FIELDS), scratch = new Int32Array(STATE_FIELDS);
    for (let seed = 0; seed < 120; seed++) {
      const rng = new Rng(seed);
      a.init(st, 0);
      for (let n = 0; n < 120 && !a.isDone(st, 0); n++) {
        const want = onlyByte(a, st, 0, scratch);
        assert.equal(a.forcedNext(st, 0), want, `schema ${schemas.indexOf(schema)} seed ${seed}`);
        want >= 0 ? forced++ : open++;
        // half the time follow the canonical completion, so walks reach the value's bound
        const b = rng.next() < 0.5
          ? a.canonicalNext(st, 0)
          : alphabet[rng.nextInt(alphabet.length)];
        scratch.set(st);
        if (a.step(scratch, 0, b)) st.set(scratch);
      }
    }
  }
  assert.ok(forced > 1000 && open > 1000, `${forced} forced, ${open} open states`);
});

Deno.test("the forced run of a pattern value stops at each choice and closes the object after the last", () => {
  const pattern = compileTextPattern({
    seq: ["Push it ", { oneOf: ["up", "left"] }, " then stop"],
  });
  const a = new JsonObjectAutomaton({
    fields: [{ name: "s", maxUnits: 40, pattern }],
    maxWhitespace: 0,
  });
  const st = new Int32Array(STATE_FIELDS), scratch = new Int32Array(STATE_FIELDS);
  const runFrom = (prefix: string) => {
    a.init(st, 0);
    for (const b of utf8.encode(prefix)) assert.ok(a.step(st, 0, b), prefix);
    return new TextDecoder().decode(Uint8Array.from(a.forcedBytes(st, 0, scratch)));
  };
  assert.equal(runFrom(""), '{"s":"Push it ');
  assert.equal(runFrom('{"s":"Push it '), "");
  assert.equal(runFrom('{"s":"Push it l'), 'eft then stop"}');
  assert.equal(runFrom('{"s":"Push it up then stop"}'), "");
  // the bound is kept: at most 3 bytes asked, 3 given, and the state passed in is unchanged
  a.init(st, 0);
  assert.deepEqual(a.forcedBytes(st, 0, scratch, 0, 3), [...utf8.encode('{"s')]);
  assert.equal(a.forcedNext(st, 0), "{".charCodeAt(0));
  // with whitespace allowed between the object's tokens nothing outside the value is forced
  const spaced = new JsonObjectAutomaton({ fields: [{ name: "s", maxUnits: 40, pattern }] });
  spaced.init(st, 0);
  assert.deepEqual(spaced.forcedBytes(st, 0, scratch), []);
});
