/**
 * The CLI's flags per command (api/client/cli_commands.ts): a flag the command does not take, or
 * two that exclude each other, is a usage error (exit 2) naming them and the command, before any
 * request; and the usage of `seed --help` shows each command with exactly the flags it takes. No
 * API runs here: SEED_API_URL names a port nothing listens on (one just closed), so a command that
 * got past its checks fails as a refused connection (or a file it cannot read), not exit 2.
 */
import assert from "node:assert/strict";
import { type CliRun, runCli } from "./_run_cli.ts";

const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const nowhere = `http://127.0.0.1:${closed.addr.port}`;
closed.close();

/** Runs the CLI against an API that is not there; `thrown` is a failure after the checks. */
async function run(args: string[]): Promise<CliRun & { thrown?: string }> {
  try {
    return await runCli(args, { SEED_API_URL: nowhere, SEED_API_KEY: "seed_unused" });
  } catch (e) {
    return { code: 1, out: "", err: "", thrown: String(e) };
  }
}

/** A value each flag takes (`--limit 5`), none for a switch. */
const VALUES: Record<string, string[]> = {
  "idempotency-key": ["k"],
  json: [],
  status: ["queued"],
  cursor: ["c"],
  after: ["c"],
  limit: ["5"],
  step: ["1"],
  out: ["/nonexistent/out"],
  csv: [],
  // With the --out it needs in skills (download, the other command taking it, takes --out too).
  overwrite: ["--out", "/nonexistent/out"],
  name: ["n"],
  "name-prefix": ["n"],
  metadata: ["k=v"],
};

/** Each command of `seed --help` and the flags its line shows, read from the text itself. */
async function helpCommands(): Promise<{ command: string[]; flags: string[] }[]> {
  const help = await run(["--help"]);
  assert.equal(help.code, 0);
  const lines = help.out.split("\n").filter((l) => /^ {2}[a-z]/.test(l));
  return lines.map((line) => {
    const words = line.trim().split(" ");
    const command = words.slice(0, words[0] === "models" || words[0] === "secrets" ? 2 : 1);
    const flags = [...line.replace(/\(.*\)$/, "").matchAll(/--([a-z-]+)/g)].map((m) => m[1]);
    return { command, flags };
  });
}

/** Positional arguments that pass the command's own checks (a well-formed job id's start). */
function positionals(command: string[]): string[] {
  const one: Record<string, string[]> = {
    submit: ["/nonexistent/spec.json"],
    list: [],
    "models upload": ["/nonexistent/model"],
    "models list": [],
    "secrets put": ["openai"],
    "secrets list": [],
    "secrets delete": ["openai"],
  };
  return [...command, ...(one[command.join(" ")] ?? ["01234567"])];
}

Deno.test("a flag that the command does not take is a usage error naming the flag, the command and where it applies", async () => {
  const status = await run(["status", "01234567", "--limit", "5"]);
  assert.equal(status.code, 2);
  assert.equal(status.out, "");
  assert.equal(
    status.err,
    "Cannot use --limit with status: it applies to list\nUsage: seed status ID [--json]\n",
  );
  const submit = await run(["submit", "spec.json", "--step", "3"]);
  assert.equal(submit.code, 2);
  assert.match(submit.err, /^Cannot use --step with submit: it applies to download, skills\n/);
  const secrets = await run(["secrets", "list", "--json"]);
  assert.equal(secrets.code, 2);
  assert.match(secrets.err, /^Cannot use --json with secrets list: it applies to submit, list, /);
  // Named as typed: the alias, and the `=` form.
  const after = await run(["status", "01234567", "--after=c"]);
  assert.match(after.err, /^Cannot use --after with status: it applies to list\n/);
});

Deno.test("flags that exclude each other are a usage error naming both, in the order typed", async () => {
  for (
    const [args, message] of [
      [["metrics", "01234567", "--json", "--csv"], "Cannot use --json with --csv in metrics"],
      [["metrics", "01234567", "--csv", "--json"], "Cannot use --csv with --json in metrics"],
      [
        ["list", "--name", "a", "--name-prefix", "b"],
        "Cannot use --name with --name-prefix in list",
      ],
      [["list", "--cursor", "a", "--after", "b"], "Cannot use --cursor with --after in list"],
    ] as const
  ) {
    const res = await run([...args]);
    assert.equal(res.code, 2, args.join(" "));
    assert.equal(res.out, "");
    assert.ok(
      res.err.startsWith(`${message} as they exclude each other: give one of them\nUsage: seed `),
      res.err,
    );
  }
});

Deno.test("a flag without the flag it needs is a usage error naming both, before any request", async () => {
  const res = await run(["skills", "01234567", "--overwrite"]);
  assert.equal(res.code, 2);
  assert.equal(res.out, "");
  assert.ok(
    res.err.startsWith(
      "Cannot use --overwrite with skills as it needs --out FILE: give both, or neither\n" +
        "Usage: seed skills ID [--step N] [--out FILE] [--overwrite]\n",
    ),
    res.err,
  );
  // With it, the command gets past its checks (and fails here as no API listens).
  const both = await run(["skills", "01234567", "--overwrite", "--out", "/nonexistent/out"]);
  assert.ok(both.thrown !== undefined, both.err);
});

Deno.test("a flag given twice is a usage error unless it repeats (--metadata), before any request", async () => {
  for (
    const [args, raw, command] of [
      [["list", "--limit", "abc", "--limit", "5"], "--limit", "list"],
      [["metrics", "01234567", "--json", "--json"], "--json", "metrics"],
      [["list", "--status=running", "--status", "queued"], "--status", "list"],
    ] as const
  ) {
    const res = await run([...args]);
    assert.equal(res.code, 2, args.join(" "));
    assert.equal(res.out, "");
    assert.ok(
      res.err.startsWith(`Cannot use ${raw} twice with ${command} as it takes one value`),
      res.err,
    );
  }
  // Repeatable: both pairs reach the request (which fails here: no API listens).
  const repeated = await run(["list", "--metadata", "a=1", "--metadata", "b=2"]);
  assert.notEqual(repeated.code, 2, repeated.err);
});

Deno.test("every command takes exactly the flags its line of seed --help shows", async () => {
  const commands = await helpCommands();
  assert.equal(commands.length, 16, "every command has a line");
  for (const { command, flags } of commands) {
    for (const flag of Object.keys(VALUES)) {
      const res = await run([...positionals(command), `--${flag}`, ...VALUES[flag]]);
      const what = `${command.join(" ")} --${flag}`;
      // --after is list's other name for --cursor, which the line shows.
      const shown = flags.includes(flag === "after" ? "cursor" : flag);
      if (shown) {
        assert.notEqual(res.code, 2, `${what} is refused: ${res.err}`);
        assert.ok(res.thrown !== undefined, `${what} got no further than its checks`);
      } else {
        assert.equal(res.code, 2, `${what} is taken but not shown`);
        assert.ok(res.err.startsWith(`Cannot use --${flag} with ${command.join(" ")}: `), res.err);
      }
    }
  }
});

Deno.test("an argument more than the command's line shows is a usage error naming it, before any request", async () => {
  const cancel = await run(["cancel", "01234567", "89abcdef"]);
  assert.equal(cancel.code, 2);
  assert.equal(cancel.out, "");
  assert.equal(
    cancel.err,
    'Cannot use "89abcdef" with cancel as it takes ID only\nUsage: seed cancel ID\n',
  );
  // After `--` it is an argument too, not a flag.
  const status = await run(["status", "01234567", "--", "--json"]);
  assert.match(status.err, /^Cannot use "--json" with status as it takes ID only\n/);
  for (const { command } of await helpCommands()) {
    const res = await run([...positionals(command), "extra"]);
    const what = command.join(" ");
    assert.equal(res.code, 2, `${what} extra: ${res.thrown ?? res.err}`);
    assert.ok(res.err.startsWith(`Cannot use "extra" with ${what} as it takes `), res.err);
    assert.ok(res.err.includes(`\nUsage: seed ${what}`), res.err);
  }
});

Deno.test("a command's --help shows that command's line, and seed --help all of them", async () => {
  const all = (await run(["--help"])).out;
  for (const { command } of await helpCommands()) {
    const res = await run([...command, "--help"]);
    assert.equal(res.code, 0);
    const lines = res.out.split("\n").filter((l) => /^ {2}[a-z]/.test(l));
    assert.equal(lines.length, 1, res.out);
    assert.ok(
      lines[0].startsWith(`  ${command.join(" ")} `) || lines[0] === `  ${command.join(" ")}`,
    );
    assert.ok(all.includes(lines[0]), lines[0]);
  }
  const models = (await run(["models", "--help"])).out.split("\n").filter((l) =>
    /^ {2}[a-z]/.test(l)
  );
  assert.deepEqual(models.map((l) => l.split(" ").slice(2, 4).join(" ")), [
    "models upload",
    "models list",
    "models get",
    "models delete",
  ]);
});
