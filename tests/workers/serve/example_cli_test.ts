/** `deno task serve:example`'s command line: `--help` prints the usage, a bad option says which. */
import assert from "node:assert/strict";

const ENTRY = new URL("../../../workers/serve/example_agent_loop.ts", import.meta.url).pathname;

/**
 * Runs the example with `args`, no API key unless `extraEnv` sets one; its exit code and output.
 */
async function run(
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...Deno.env.toObject() };
  delete env.SEED_API_KEY;
  Object.assign(env, extraEnv);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", ENTRY, ...args],
    env,
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test("serve:example --help prints the usage and exits 0", async () => {
  const r = await run(["--help"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^usage: SEED_API_KEY=seed_… deno task serve:example --model job:<id>/);
  assert.match(r.stdout, /--skills/);
});

Deno.test("serve:example names an unknown option and exits 2 without a stack trace", async () => {
  const r = await run(["--bogus"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Unknown option '--bogus'/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  const noKey = await run(["--model", "job:x"]);
  assert.equal(noKey.code, 2);
  assert.match(noKey.stderr, /^SEED_API_KEY is not set/);
  assert.match(noKey.stderr, /\nusage:/);
  const noModel = await run([], { SEED_API_KEY: "seed_x" });
  assert.equal(noModel.code, 2);
  assert.match(noModel.stderr, /^Option '--model job:<id>' is required/);
});

Deno.test("serve:example names a bad option value and exits 2 before it calls anything", async () => {
  // No server runs here: an option that got past the check would end in a fetch error instead.
  for (
    const [args, reason] of [
      [["--options", "{bad"], /^Option '--options' must be a JSON object: /],
      [["--options", "[1]"], /^Option '--options' must be a JSON object: got '\[1\]'/],
      [["--max-turns", "abc"], /^Option '--max-turns' must be a non-negative integer: got 'abc'/],
      [["--seed", "1.5"], /^Option '--seed' must be a non-negative integer: got '1.5'/],
      [["--history", ""], /^Option '--history' must be a non-negative integer: got ''/],
      [["--temperature", "hot"], /^Option '--temperature' must be a non-negative number/],
    ] as const
  ) {
    const r = await run(["--model", "job:x", ...args], { SEED_API_KEY: "seed_x" });
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, reason);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});
