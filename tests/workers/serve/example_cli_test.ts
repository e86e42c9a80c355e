/** `deno task serve:example`'s command line: `--help` prints the usage, a bad option says which. */
import assert from "node:assert/strict";

const ENTRY = new URL("../../../workers/serve/example_agent_loop.ts", import.meta.url).pathname;

/** Runs the example with `args` and no API key; its exit code and its output. */
async function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...Deno.env.toObject() };
  delete env.SEED_API_KEY;
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
  assert.match(noKey.stderr, /^usage:/);
});
