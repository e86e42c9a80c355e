/**
 * Every benchmark and developer tool answers `--help` with its usage (exit 0) and a bad command
 * line with one error line on stderr (exit 2), run as a user runs it: a child process of the real
 * script. Nothing is measured: each exits before its work starts.
 */
import assert from "node:assert/strict";

const root = new URL("../../", import.meta.url).pathname;

/** How a tool is started, the name its error lines start with, and its extra bad command lines. */
interface Tool {
  command: string[];
  name: string;
  bad?: { args: string[]; line: string }[];
}

const deno = (path: string, name = path): Tool => ({
  command: [Deno.execPath(), "run", "-A", path],
  name,
});

const TOOLS: Tool[] = [
  deno("bench/constrained.ts", "bench:constrained"),
  {
    ...deno("bench/constrained.ts", "bench:constrained"),
    bad: [{
      args: ["--steps", "many"],
      line:
        "bench:constrained: --steps must be a whole number of at least 1: current value is many (see --help)",
    }],
  },
  deno("bench/tools/api_compare.ts", "bench:api-compare"),
  deno("bench/tools/api_profile.ts"),
  deno("bench/tools/engine_ab.ts"),
  deno("bench/tools/engine_profile.ts"),
  deno("bench/tools/gpu_placement.ts"),
  {
    ...deno("bench/tools/gpu_probe.ts"),
    bad: [{
      args: ["cuda", "tpu"],
      line:
        "bench/tools/gpu_probe.ts: Unknown provider 'tpu': one of cuda, webgpu, cpu (see --help)",
    }],
  },
  deno("bench/tools/peft_fixture.ts"),
  {
    ...deno("bench/tools/preset.ts"),
    bad: [{
      args: ["sokobann"],
      line: "", // checked by prefix below: the preset names are jobs/presets.ts's
    }],
  },
  deno("bench/tools/serve_profile.ts"),
  { command: ["bash", "bench/tools/gpu_check.sh"], name: "bench/tools/gpu_check.sh" },
  { command: ["bash", "bench/tools/gpu_pack.sh"], name: "bench/tools/gpu_pack.sh" },
  { command: ["bash", "bench/gpu_rollout.sh"], name: "bench/gpu_rollout.sh" },
  { command: ["python3", "bench/tools/peft_check.py"], name: "bench/tools/peft_check.py" },
];

const hasPython = await new Deno.Command("python3", { args: ["--version"], stdout: "null" })
  .output().then((o) => o.success, () => false);

async function run(command: string[], args: string[]) {
  const out = await new Deno.Command(command[0], {
    args: [...command.slice(1), ...args],
    cwd: root,
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

for (const tool of TOOLS) {
  const shown = tool.command.at(-1)!;
  Deno.test({
    name: `${shown} ${
      tool.bad ? tool.bad.map((b) => b.args.join(" ")).join(", ") : "--help, -h and --nope"
    } are answered in one line`,
    ignore: tool.command[0] === "python3" && !hasPython,
    async fn() {
      if (tool.bad) {
        for (const bad of tool.bad) {
          const got = await run(tool.command, bad.args);
          assert.equal(got.code, 2, got.stderr);
          assert.equal(got.stdout, "");
          assert.equal(got.stderr.trimEnd().split("\n").length, 1, got.stderr);
          if (bad.line) assert.equal(got.stderr.trimEnd(), bad.line);
          else assert.match(got.stderr, new RegExp(`^${tool.name}: Unknown preset 'sokobann': `));
        }
        return;
      }
      for (const flag of ["--help", "-h"]) {
        const help = await run(tool.command, [flag]);
        assert.equal(help.code, 0, help.stderr);
        assert.match(help.stdout, /Usage: /);
        assert.ok(help.stdout.includes(tool.name), help.stdout);
      }
      const bad = await run(tool.command, ["--nope"]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.equal(bad.stdout, "");
      assert.equal(bad.stderr, `${tool.name}: Unknown option '--nope' (see --help)\n`);
    },
  });
}
