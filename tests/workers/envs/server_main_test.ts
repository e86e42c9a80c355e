import assert from "node:assert/strict";
import { connectHttpEnvironment } from "../../../workers/envs/mod.ts";

/** Starts `deno task env-server` with `args`; resolves with the child and the URLs it printed. */
async function startServer(args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../../../workers/envs/server_main.ts", import.meta.url).pathname,
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  return { child, reader, firstLine: text.split("\n")[0] };
}

Deno.test("env-server serves the chosen environment on the given port and stops on SIGTERM", async () => {
  const { child, reader, firstLine } = await startServer(["--env", "sokoban", "--port", "0"]);
  try {
    const match = firstLine.match(
      /^serving sokoban at (http:\/\/127\.0\.0\.1:\d+\/envs\/sokoban)$/,
    );
    assert.ok(match, firstLine);
    const env = await connectHttpEnvironment(match[1]);
    assert.equal(env.id, "sokoban");
    assert.equal((await env.sampleTasks("train", 2, 1)).length, 2);
  } finally {
    child.kill("SIGTERM");
    const status = await child.status;
    await reader.cancel();
    await child.stderr.cancel();
    assert.equal(status.code, 0);
  }
});

Deno.test("env-server refuses an unknown environment id", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../../../workers/envs/server_main.ts", import.meta.url).pathname,
      "--env",
      "chess",
    ],
  }).output();
  assert.equal(out.code, 2);
  assert.match(new TextDecoder().decode(out.stderr), /must be one of sokoban/);
});

Deno.test("env-server refuses a --port that is not a whole number from 0 to 65535 with one line and exit 2", async () => {
  // Number() would read "1e3" as 1000, "0x10" as 16 and "" as 0 (a free port): each is refused.
  for (const value of ["abc", "1e3", "0x10", "", "65536", "-1"]) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../../../workers/envs/server_main.ts", import.meta.url).pathname,
        "--env",
        "sokoban",
        `--port=${value}`,
      ],
      stdout: "piped",
      stderr: "piped",
      // A server that took the port would serve until stopped (a bound, not a measurement).
      signal: AbortSignal.timeout(60_000),
    }).output();
    assert.equal(out.code, 2, value);
    assert.equal(new TextDecoder().decode(out.stdout), "", value);
    assert.equal(
      new TextDecoder().decode(out.stderr),
      "Cannot start the environment server as --port must be a whole number from 0 to 65535: " +
        `current value is ${JSON.stringify(value)}\n`,
    );
  }
});

Deno.test("env-server refuses a command line it cannot read with one line and exit 2", async () => {
  // `--port -1` (a value starting with a dash), `--port` last, a mistyped flag, a stray argument.
  const cases: [string[], string][] = [
    [["--port", "-1"], "Option '--port' argument is ambiguous."],
    [["--port"], "Option '--port <value>' argument missing"],
    [["--prot", "5"], "Unknown option '--prot'"],
    [["--env", "sokoban", "5"], "Unexpected argument '5'"],
  ];
  for (const [args, why] of cases) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("../../../workers/envs/server_main.ts", import.meta.url).pathname,
        ...args,
      ],
      stdout: "piped",
      stderr: "piped",
      // A server that read the line would serve until stopped (a bound, not a measurement).
      signal: AbortSignal.timeout(60_000),
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 2, args.join(" "));
    assert.equal(new TextDecoder().decode(out.stdout), "", args.join(" "));
    assert.ok(
      err.startsWith(
        "Cannot start the environment server as its command line must be " +
          `[--env ID]… [--port P] [--host H]: ${why}`,
      ),
      err,
    );
    assert.equal(err.split("\n").length, 2, err); // one line, then the newline
  }
});
