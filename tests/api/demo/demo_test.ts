/**
 * End to end: `api/demo/main.ts` as a user runs it — the API and a worker as child processes over a
 * fresh embedded database + S3 folder, real HTTP, then the downloaded files are checked.
 *
 * WORKER_ENTRY is the one line to change when the SEED trainer registers its handlers in
 * workers/main.ts: set it to "workers/main.ts" (the demo's default), and the same assertions run
 * against a 2-step seed job of the real trainer at tiny size.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { skillsFound } from "../../../api/demo/progress.ts";
import { childrenOf } from "../../_harness/proc.ts";

const WORKER_ENTRY = "workers/main.ts";
const DEMO = fileURLToPath(new URL("../../../api/demo/main.ts", import.meta.url));
const FAILING_WORKER = "tests/api/demo/_failing_worker.ts";

/** Runs the demo to its end with `args`; embedded database and S3 forced. */
async function runDemo(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", DEMO, ...args],
    env: { DATABASE_URL: "", S3_ENDPOINT: "", NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

const sha256 = async (path: string) =>
  createHash("sha256").update(await Deno.readFile(path)).digest("hex");

/** Child pids the demo reported as stopped; asserts each has really gone. */
function assertChildrenGone(stdout: string): void {
  const pids = [...stdout.matchAll(/\((?:pid )?(\d+)\) stopped/g)].map((m) => Number(m[1]));
  assert.equal(pids.length, 2, `expected the api and the worker to be stopped:\n${stdout}`);
  for (const pid of pids) {
    let alive = true;
    try {
      Deno.statSync(`/proc/${pid}`);
    } catch {
      alive = false;
    }
    assert.equal(alive, false, `child ${pid} still runs`);
  }
}

/** Reads the safetensors header (8-byte little-endian length, then JSON). */
function safetensorsHeader(bytes: Uint8Array): Record<string, unknown> {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
}

Deno.test("the demo trains through the API and a worker and downloads a verified checkpoint and skill library", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-test-" });
  try {
    // `--out` names a folder holding an earlier run: it is kept, and this run writes `out-2`.
    const earlier = `${tmp}/out`;
    const outDir = `${earlier}-2`;
    await Deno.mkdir(earlier);
    await Deno.writeTextFile(`${earlier}/stale.txt`, "from an earlier run");
    const run = await runDemo([
      "--worker",
      WORKER_ENTRY,
      "--steps",
      "2",
      "--eval-episodes",
      "4",
      "--warmup-episodes",
      "16",
      "--out",
      earlier,
      "--data-dir",
      `${tmp}/data`,
      "--timeout-min",
      "15",
    ]);
    assert.equal(run.code, 0, `demo failed:\n${run.stdout}\n${run.stderr}`);
    const job = JSON.parse(await Deno.readTextFile(`${outDir}/job.json`));
    assert.equal(job.status, "succeeded");
    assert.ok(
      run.stdout.includes(
        `output folder: ${outDir} (${earlier} holds an earlier run's output and is kept)`,
      ),
      run.stdout,
    );
    assert.ok(
      run.stdout.includes(`Files (${earlier}/ was not free when this run started and is kept):`),
    );
    assert.equal(await Deno.readTextFile(`${earlier}/stale.txt`), "from an earlier run");

    // The checkpoint: every file listed in SHA256SUMS, with that hash, and the HF file set.
    const sums = (await Deno.readTextFile(`${outDir}/checkpoint/SHA256SUMS`)).trim().split("\n")
      .map((l) => l.split("  ") as [string, string]);
    const step = Number(sums[0][1].match(/^step-(\d+)\//)![1]);
    assert.equal(step, 2);
    for (const [hash, name] of sums) {
      assert.equal(await sha256(`${outDir}/checkpoint/${name}`), hash, name);
    }
    const names = sums.map(([, n]) => n.replace(/^step-\d+\//, "")).sort();
    for (
      const required of [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "optimizer.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "trainer_state.json",
      ]
    ) assert.ok(names.includes(required), `checkpoint lacks ${required}: ${names}`);
    const dir = `${outDir}/checkpoint/step-${step}`;
    const config = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
    assert.ok(["LlamaForCausalLM", "Qwen2ForCausalLM"].includes(config.architectures[0]));
    for (const key of ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"]) {
      assert.equal(typeof config[key], "number", key);
    }
    const header = safetensorsHeader(await Deno.readFile(`${dir}/model.safetensors`));
    assert.deepEqual((header.__metadata__ as Record<string, string>).format, "pt");
    assert.ok("model.layers.0.self_attn.q_proj.weight" in header);
    assert.ok("model.embed_tokens.weight" in header);

    // The skill library: version 1 of this job, skills with text and provenance.
    const library = JSON.parse(await Deno.readTextFile(`${outDir}/skills.json`));
    assert.equal(library.version, 1);
    assert.equal(library.job_id, job.id);
    for (const skill of library.skills) {
      assert.equal(typeof (skill.text ?? skill.skill), "string");
      assert.ok(Array.isArray(skill.provenance) && skill.provenance.length > 0);
    }

    // Evaluation before RL (step 0) and after (last step), as the summary reports them; the
    // library holds exactly the skills the metrics say were found.
    const metrics = JSON.parse(await Deno.readTextFile(`${outDir}/metrics.json`));
    assert.equal(library.skills.length, skillsFound(metrics));
    const at = (s: number) => metrics.points.find((p: { step: number }) => p.step === s)?.values;
    for (const split of ["test_seen", "test_unseen"]) {
      assert.equal(typeof at(0)[`eval/${split}/success_rate`], "number");
      assert.equal(typeof at(2)[`eval/${split}/success_rate`], "number");
    }
    assert.match(run.stdout, /before RL \(step 0\)/);
    assert.match(run.stdout, /episodes per split, ± = 95% interval/);
    for (const file of ["job.json", "spec.json", "metrics.csv", "skills.json"]) {
      assert.ok(run.stdout.includes(`${outDir}/${file}`), `the summary lists ${file}`);
    }
    assert.ok(run.stdout.includes(`curl -s http://127.0.0.1:`));
    assert.match(
      run.stdout,
      /\n {2}export SEED_API_URL=http:\/\/127\.0\.0\.1:\d+ SEED_API_KEY=seed_\S+\n/,
    );
    assert.ok(run.stdout.includes(`/v1/jobs/${job.id}/checkpoints/2/archive`));
    // How to serve the trained checkpoint on this run's data (a plain `task serve` sees none).
    assert.ok(run.stdout.includes(`SEED_DATA_DIR=${tmp}/data npx -y deno@2.9.6 task serve`));
    assertChildrenGone(run.stdout);
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

Deno.test("the demo exits non-zero with the job's error when the job fails, and stops its children", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-test-" });
  try {
    const run = await runDemo([
      "--worker",
      FAILING_WORKER,
      "--steps",
      "1",
      "--out",
      `${tmp}/out`,
      "--data-dir",
      `${tmp}/data`,
    ]);
    assert.equal(run.code, 1, `${run.stdout}\n${run.stderr}`);
    assert.match(
      run.stderr,
      /demo failed: Cannot finish the demo as job .* must succeed: it is failed/,
    );
    assert.match(run.stderr, /Cannot train in this test as the handler must fail/);
    await assert.rejects(Deno.stat(`${tmp}/out`), Deno.errors.NotFound);
    assertChildrenGone(run.stdout);
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

Deno.test("Ctrl-C stops the demo's children in order: the worker drains the job, then the API stops", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "seed-demo-test-" });
  // The demo leads a process group of its own, which the test signals as a terminal's Ctrl-C
  // does; its worker runs a compute process whose steps spin 3 s (BLOCK_MS): the API must outlive
  // the step in progress, as the worker releases the job through the database the API serves.
  const demo = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      DEMO,
      ...["--worker", "tests/workers/worker/_compute_worker.ts", "--steps", "1000"],
      ...["--out", `${tmp}/out`, "--data-dir", `${tmp}/data`],
    ],
    env: { DATABASE_URL: "", S3_ENDPOINT: "", NO_COLOR: "1", BLOCK_MS: "3000" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }).spawn();
  const stderr = new Response(demo.stderr).text();
  const reader = demo.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let stdout = "";
  const pids: number[] = [];
  try {
    // Until the worker's compute process runs (the worker's pid comes on stdout).
    let worker: number | undefined;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stdout += value;
      worker ??= Number(stdout.match(/worker started \(pid (\d+)/)?.[1]) || undefined;
      if (/\bjob [0-9a-f-]{36} queued/.test(stdout)) break;
    }
    assert.ok(worker, stdout);
    pids.push(...[...stdout.matchAll(/\(pid (\d+)/g)].map((m) => Number(m[1])));
    const log = `${tmp}/data/worker.log`;
    for (let i = 0; i < 600; i++) {
      const text = await Deno.readTextFile(log).catch(() => "");
      if (/"step":1\b|"msg":"job claimed"/.test(text) && childrenOf(worker).length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(childrenOf(worker).length > 0, "the worker runs its compute process");
    pids.push(...childrenOf(worker));
    Deno.kill(-demo.pid, "SIGINT");
    // `deno task demo` forwards the same Ctrl-C to the demo once more, milliseconds later.
    await new Promise((r) => setTimeout(r, 5));
    Deno.kill(demo.pid, "SIGINT");
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stdout += value;
    }
    const { code } = await demo.status;
    const err = await stderr;
    assert.equal(code, 130, `${stdout}\n${err}`);
    assert.match(stdout, /worker \(pid \d+\) stopped \(exit code 0\)/);
    assert.match(stdout, /api \(pid \d+\) stopped \(exit code 0\)/);
    assertChildrenGone(stdout);
    const workerLog = await Deno.readTextFile(`${tmp}/data/worker.log`);
    assert.match(workerLog, /"msg":"job released while draining"/, workerLog);
    assert.doesNotMatch(workerLog, /"msg":"job failed"/, workerLog);
    // The output folder it took at the start is given back: nothing of this run stays.
    assert.ok(stdout.includes(`output folder: ${tmp}/out\n`), stdout);
    await assert.rejects(Deno.stat(`${tmp}/out`), Deno.errors.NotFound);
  } finally {
    for (const pid of pids) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    await demo.status;
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});
