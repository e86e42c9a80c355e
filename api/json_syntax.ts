/**
 * Where a JSON text first breaks the grammar of RFC 8259, for a 400 that points at it: V8's
 * `JSON.parse` errors often name no position (`Unexpected token '}', "…" is not valid JSON`).
 * The scan is iterative (a stack of open containers, no recursion), so no depth can overflow it;
 * it runs only after `JSON.parse` has already failed.
 */

/** The first syntax error of a JSON text. */
export interface JsonSyntaxError {
  /** What was expected there, e.g. `',' or '}'`, `a value`, `the end of the input`. */
  expected: string;
  /** 1-based line (lines end at `\n`). */
  line: number;
  /** 1-based column on that line, in characters (UTF-16 code units). */
  column: number;
  /** 0-based byte offset into the UTF-8 text. */
  byte: number;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WHITESPACE = /[ \t\n\r]*/y;
const ESCAPES = new Set(['"', "\\", "/", "b", "f", "n", "r", "t"]);

type Expect = "value" | "value-or-]" | "key-or-}" | "key" | "colon" | "comma-or-close" | "end";

/** The first syntax error of `text`, or undefined when it is valid JSON. */
export function jsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const stack: ("{" | "[")[] = [];
  let i = 0;
  let expect: Expect = "value";
  const fail = (at: number, expected: string): JsonSyntaxError => {
    const before = text.slice(0, at);
    const lineStart = before.lastIndexOf("\n") + 1;
    return {
      expected,
      line: before.split("\n").length,
      column: at - lineStart + 1,
      byte: new TextEncoder().encode(before).length,
    };
  };
  /** Index just after the string starting at `start` (a `"`), or the error inside it. */
  const scanString = (start: number): number | JsonSyntaxError => {
    for (let j = start + 1; j < text.length; j++) {
      const c = text[j];
      if (c === '"') return j + 1;
      if (c < " ") return fail(j, "an escaped control character");
      if (c === "\\") {
        const e = text[j + 1];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(j + 2, j + 6))) {
            return fail(j, "four hex digits after \\u");
          }
          j += 5;
        } else if (ESCAPES.has(e)) j++;
        else return fail(j, 'a valid escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)');
      }
    }
    return fail(text.length, "a closing quote");
  };
  const afterValue = (): Expect => (stack.length ? "comma-or-close" : "end");
  for (;;) {
    WHITESPACE.lastIndex = i;
    WHITESPACE.test(text);
    i = WHITESPACE.lastIndex;
    const c = text[i];
    switch (expect) {
      case "end":
        return i === text.length ? undefined : fail(i, "the end of the input");
      case "colon":
        if (c !== ":") return fail(i, "':'");
        i++;
        expect = "value";
        continue;
      case "comma-or-close": {
        const close = stack.at(-1) === "{" ? "}" : "]";
        if (c === ",") {
          i++;
          expect = close === "}" ? "key" : "value";
        } else if (c === close) {
          i++;
          stack.pop();
          expect = afterValue();
        } else return fail(i, `',' or '${close}'`);
        continue;
      }
      case "key-or-}":
      case "key":
        if (expect === "key-or-}" && c === "}") {
          i++;
          stack.pop();
          expect = afterValue();
          continue;
        }
        if (c !== '"') return fail(i, expect === "key" ? "a string key" : "a string key or '}'");
        {
          const end = scanString(i);
          if (typeof end !== "number") return end;
          i = end;
        }
        expect = "colon";
        continue;
      case "value":
      case "value-or-]": {
        if (expect === "value-or-]" && c === "]") {
          i++;
          stack.pop();
          expect = afterValue();
          continue;
        }
        if (c === "{" || c === "[") {
          stack.push(c);
          i++;
          expect = c === "{" ? "key-or-}" : "value-or-]";
          continue;
        }
        if (c === '"') {
          const end = scanString(i);
          if (typeof end !== "number") return end;
          i = end;
        } else if (text.startsWith("true", i)) i += 4;
        else if (text.startsWith("false", i)) i += 5;
        else if (text.startsWith("null", i)) i += 4;
        else {
          NUMBER.lastIndex = i;
          if (!NUMBER.test(text)) return fail(i, expect === "value" ? "a value" : "a value or ']'");
          i = NUMBER.lastIndex;
        }
        expect = afterValue();
        continue;
      }
    }
  }
}
