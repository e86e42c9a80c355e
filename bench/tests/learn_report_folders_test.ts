/**
 * `bench:learn --report` over one folder per arm (each arm run as its own process from the same
 * warm-up): the warm-up is one row, the folders' `skills.jsonl` are concatenated, and folders whose
 * warm-ups differ are refused.
 */
import assert from "node:assert/strict";

const LEARN = new URL("../learn.ts", import.meta.url).pathname;

/** Writes an arm's output folder: step-0 and step-1 metrics of seed 11 and its warm-up. */
async function armFolder(root: string, arm: string, warmupSteps: number, seconds: number) {
  const dir = `${root}/${arm}`;
  await Deno.mkdir(dir);
  const row = (step: number, success: number) =>
    JSON.stringify({
      env: "sokoban-demo",
      arm,
      method: arm,
      seed: 11,
      samples_per_step: 64,
      episodes: 200,
      step,
      metrics: {
        "eval/test_seen/success_rate": success,
        "eval/test_unseen/success_rate": success,
        seconds_eval: seconds,
      },
    });
  await Deno.writeTextFile(
    `${dir}/metrics.jsonl`,
    [row(0, 0.5), row(1, arm === "seed" ? 0.6 : 0.55)].join("\n") + "\n",
  );
  await Deno.writeTextFile(
    `${dir}/warmup.jsonl`,
    JSON.stringify({
      env: "sokoban-demo",
      seed: 11,
      metrics: { warmup_policy_optimizer_steps: warmupSteps, warmup_policy_seconds: seconds },
    }) + "\n",
  );
  return dir;
}

async function report(dirs: string[], out: string) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      LEARN,
      "--report",
      dirs.join(","),
      "--arms",
      "grpo,seed",
      "--baseline",
      "grpo",
      "--out",
      out,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code,
    stdout: new TextDecoder().decode(stdout),
    stderr: new TextDecoder().decode(stderr),
  };
}

Deno.test("--report pairs arms from one warm-up held in two folders and lists that warm-up once", async () => {
  const root = await Deno.makeTempDir();
  try {
    // The same warm-up, trained in one run and loaded from the cache in the other: only timings
    // differ.
    const grpo = await armFolder(root, "grpo", 392, 161);
    const seed = await armFolder(root, "seed", 392, 0.4);
    // Only the SEED arm's folder has skills; the report's skills.jsonl is its lines unchanged.
    const skills = JSON.stringify({ env: "sokoban-demo", arm: "seed", seed: 11, step: 1 }) + "\n";
    await Deno.writeTextFile(`${seed}/skills.jsonl`, skills);
    const r = await report([grpo, seed], `${root}/out`);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await Deno.readTextFile(`${root}/out/skills.jsonl`), skills);
    const warmupRows = r.stdout.split("\n").filter((l) =>
      l.startsWith("| sokoban-demo | 11 | 392")
    );
    assert.equal(warmupRows.length, 1);
    assert.ok(r.stdout.includes("over 1 seed(s)"), r.stdout);
    assert.ok(
      r.stdout.includes("| sokoban-demo | test_seen | 1 | 64 | 55.0% ±n/a | 60.0% ±n/a | 5.0 "),
      r.stdout,
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("--report refuses arms whose folders hold different warm-ups of the same seed", async () => {
  const root = await Deno.makeTempDir();
  try {
    const grpo = await armFolder(root, "grpo", 392, 161);
    const seed = await armFolder(root, "seed", 448, 161);
    const r = await report([grpo, seed], `${root}/out`);
    assert.equal(r.code, 2);
    assert.ok(r.stderr.includes(`differs from the one in ${grpo}`), r.stderr);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
