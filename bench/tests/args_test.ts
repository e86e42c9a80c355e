import assert from "node:assert/strict";
import { parseBenchArgs } from "../_args.ts";

const config = {
  name: "bench:learn",
  usage: "Usage: deno task bench:learn [--seed-list 1,2,3] [--steps 12] [--full]",
  options: {
    "seed-list": { type: "string" },
    steps: { type: "string", default: "12" },
    full: { type: "boolean", default: false },
    env: { type: "string", multiple: true },
  },
} as const;

Deno.test("a good command line gives the flag values, defaults filled in", () => {
  const outcome = parseBenchArgs(
    ["--seed-list", "1,2", "--full", "--env", "sokoban", "--env=household"],
    config,
  );
  assert.equal(outcome.kind, "values");
  if (outcome.kind !== "values") return;
  assert.deepEqual({ ...outcome.values }, {
    "seed-list": "1,2",
    steps: "12",
    full: true,
    env: ["sokoban", "household"],
  });
});

Deno.test("--help and -h give the usage text, even beside an unknown flag", () => {
  for (const argv of [["--help"], ["-h"], ["--steps", "3", "--help"], ["--nope", "-h"]]) {
    assert.deepEqual(
      parseBenchArgs(argv, config),
      { kind: "help", text: config.usage },
      argv.join(" "),
    );
  }
});

Deno.test("a --help after -- is a positional argument, not a request for the usage", () => {
  assert.deepEqual(parseBenchArgs(["--", "--help"], config), {
    kind: "error",
    line:
      "bench:learn: Unexpected argument '--help'. This command does not take positional arguments (see --help)",
  });
});

Deno.test("an unknown or misspelled flag is one error line naming it", () => {
  assert.deepEqual(parseBenchArgs(["--seed-lists", "1"], config), {
    kind: "error",
    line: "bench:learn: Unknown option '--seed-lists' (see --help)",
  });
  assert.deepEqual(parseBenchArgs(["--nope"], config), {
    kind: "error",
    line: "bench:learn: Unknown option '--nope' (see --help)",
  });
});

Deno.test("a flag missing its value is one error line naming the flag", () => {
  assert.deepEqual(parseBenchArgs(["--seed-list"], config), {
    kind: "error",
    line: "bench:learn: Option '--seed-list <value>' argument missing (see --help)",
  });
  // a value that looks like a flag: parseArgs' three-line hint becomes one line
  const ambiguous = parseBenchArgs(["--steps", "--full"], config);
  assert.equal(ambiguous.kind, "error");
  if (ambiguous.kind !== "error") return;
  assert.equal(ambiguous.line.includes("\n"), false);
  assert.match(
    ambiguous.line,
    /^bench:learn: Option '--steps' argument is ambiguous\. .*'--steps=-XYZ'.* \(see --help\)$/,
  );
});

Deno.test("a value given to a boolean flag and a positional argument are one error line each", () => {
  assert.deepEqual(parseBenchArgs(["--full=yes"], config), {
    kind: "error",
    line: "bench:learn: Option '--full' does not take an argument (see --help)",
  });
  assert.deepEqual(parseBenchArgs(["sokoban"], config), {
    kind: "error",
    line:
      "bench:learn: Unexpected argument 'sokoban'. This command does not take positional arguments (see --help)",
  });
});

Deno.test("a bad options table is thrown, not reported as a bad command line", () => {
  assert.throws(
    () =>
      parseBenchArgs([], {
        name: "bench:x",
        usage: "",
        // @ts-expect-error a type parseArgs does not know
        options: { n: { type: "number" } },
      }),
    TypeError,
  );
});

Deno.test("a tool that takes positional arguments gets them, and one too many is one error line", () => {
  const tool = { name: "bench/tools/preset.ts", usage: "Usage: …", options: {}, positionals: 1 };
  const good = parseBenchArgs(["sokoban"], tool);
  assert.equal(good.kind, "values");
  if (good.kind === "values") assert.deepEqual(good.positionals, ["sokoban"]);
  assert.deepEqual(parseBenchArgs(["sokoban", "household"], tool), {
    kind: "error",
    line:
      "bench/tools/preset.ts: Unexpected argument 'household'. This command takes at most 1 positional argument (see --help)",
  });
  assert.deepEqual(parseBenchArgs(["--nope"], tool), {
    kind: "error",
    line: "bench/tools/preset.ts: Unknown option '--nope' (see --help)",
  });
});
