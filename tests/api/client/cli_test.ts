import assert from "node:assert/strict";
import {
  appendEvent,
  fenceOf,
  reapExpiredLeases,
  recordMetrics,
  saveCheckpoint,
  saveSkillLibrary,
  setProgress,
  succeedJob,
} from "../../../jobs/mod.ts";
import { cliMain } from "../../../api/client/cli.ts";
import type { CliIo } from "../../../api/client/cli_io.ts";
import { serveApi } from "../../../api/main.ts";
import { claimAs, renameJobId, startApiFixture } from "../_fixture.ts";

const fx = await startApiFixture();
const serverEnv = { ...fx.s3Env, DATABASE_URL: fx.url, SEED_SECRETS_KEY: "5a".repeat(32) };
for (const [k, v] of Object.entries(serverEnv)) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const env: Record<string, string> = {
  SEED_API_URL: `http://127.0.0.1:${api.port}`,
  SEED_API_KEY: fx.keyA,
};

async function run(
  args: string[],
  stdin = "",
  onOut?: (text: string) => void,
  onErr?: (text: string) => void,
): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const io: CliIo = {
    out: (t) => {
      out += t;
      onOut?.(t);
    },
    err: (t) => {
      err += t;
      onErr?.(t);
    },
    tty: false,
    env: (n) => env[n],
    stdin: () => Promise.resolve(stdin),
  };
  const code = await cliMain(args, io);
  return { code, out, err };
}

/** Submits a sokoban job through the CLI (its spec written in `dir`) and claims it as a worker. */
async function submitAndClaim(dir: string) {
  await Deno.writeTextFile(
    `${dir}/spec.json`,
    JSON.stringify({ env: { id: "sokoban" }, priority: 1000 }),
  );
  const id = (await run(["submit", `${dir}/spec.json`])).out.trim();
  return { id, job: await claimAs(fx.db, id) };
}

/** A job submitted and claimed with a skill library saved at `step` (`texts` its skills). */
async function jobWithLibrary(dir: string, step: number, texts: string[]) {
  const { id, job } = await submitAndClaim(dir);
  const json = { version: 1, job_id: id, step, skills: texts.map((text) => ({ text })) };
  await saveSkillLibrary(fx.db, fx.store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
    step,
    json,
    skillCount: texts.length,
  });
  return { id, json };
}

Deno.test("the CLI submits a spec file, shows its status, lists and cancels it over HTTP", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const submitted = await run(["--", "submit", `${dir}/spec.json`]);
    assert.equal(submitted.code, 0, submitted.err);
    const id = submitted.out.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    const status = await run(["status", id]);
    assert.match(status.out, new RegExp(`job +${id}`));
    assert.match(status.out, /^status +queued \(run 1 of at most 3\)$/m);
    const list = await run(["list", "--status", "queued"]);
    const [header, row] = list.out.split("\n");
    assert.match(header, /^ID +NAME +MODEL +METHOD +STATUS +STEP +CREATED \(UTC\) +RESULT$/);
    assert.match(
      row,
      new RegExp(`^${id} +- +builtin:tiny +seed +queued +- +\\d{4}-\\d\\d-\\d\\d `),
    );
    const cancel = await run(["cancel", id]);
    assert.equal(cancel.out.trim(), `${id}\tcancelled`);
    // A second cancel finds the job ended: the API's 409 comes back as the command's error.
    const again = await run(["cancel", id]).catch((e) => e);
    assert.ok(again instanceof Error, "a cancel of a cancelled job must fail");
    assert.equal(
      again.message,
      `POST /v1/jobs/${id}/cancel failed with HTTP 409: Cannot cancel job ${id} as it must be ` +
        `queued or running: it has already ended as cancelled; nothing changed`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI downloads the latest checkpoint and verifies every file's sha256", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
    const weights = new Uint8Array(70_000).map((_, i) => (i * 31) % 251);
    await saveCheckpoint(fx.db, fx.store, writer, {
      step: 1,
      files: [{ name: "model.safetensors", bytes: new Uint8Array(10) }],
    });
    await saveCheckpoint(fx.db, fx.store, writer, {
      step: 5,
      files: [{ name: "model.safetensors", bytes: weights }, {
        name: "config.json",
        bytes: new TextEncoder().encode("{}"),
      }],
    });
    const out = `${dir}/out`;
    const res = await run(["download", id, "--out", out]);
    assert.equal(res.code, 0, res.err);
    assert.match(res.err, /step 5: 2 files, sha256 verified/);
    assert.deepEqual(await Deno.readFile(`${out}/step-5/model.safetensors`), weights);
    const first = await run(["download", id, "--step", "1", "--out", out]);
    assert.equal(first.code, 0);
    assert.equal((await Deno.readFile(`${out}/step-1/model.safetensors`)).byteLength, 10);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's download refuses to write over files already there unless given --overwrite", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const config = new TextEncoder().encode('{"layers": 2}');
    await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
      step: 3,
      files: [{ name: "config.json", bytes: config }, {
        name: "model.safetensors",
        bytes: new Uint8Array(64).fill(7),
      }],
    });
    const out = `${dir}/out`;
    assert.equal((await run(["download", id, "--out", out])).code, 0);
    // A file of the user's where the download would write: kept, and named in the error.
    await Deno.writeTextFile(`${out}/step-3/config.json`, "mine");
    await Deno.remove(`${out}/step-3/model.safetensors`);
    const again = await run(["download", id, "--out", out]).catch((e) => e);
    assert.ok(again instanceof Error, "a download over an existing file must fail");
    assert.equal(
      again.message,
      `Cannot download step 3 of job ${id} into ${out} as ${out}/step-3/config.json already ` +
        `exists: give --overwrite to replace it`,
    );
    assert.equal(await Deno.readTextFile(`${out}/step-3/config.json`), "mine");
    // Nothing was written: the file that was missing is still missing.
    await assert.rejects(() => Deno.stat(`${out}/step-3/model.safetensors`), Deno.errors.NotFound);
    const replaced = await run(["download", id, "--out", out, "--overwrite"]);
    assert.equal(replaced.code, 0, replaced.err);
    assert.deepEqual(await Deno.readFile(`${out}/step-3/config.json`), config);
    assert.equal((await Deno.readFile(`${out}/step-3/model.safetensors`)).byteLength, 64);
    // Every file there: one error naming the first, with the count of the others.
    const both = await run(["download", id, "--out", out]).catch((e) => e);
    assert.equal(
      both.message,
      `Cannot download step 3 of job ${id} into ${out} as ${out}/step-3/config.json and 1 more ` +
        `of its files already exist: give --overwrite to replace them`,
    );
    const help = await run(["download", "--help"]);
    assert.match(help.out, /^ {2}download ID \[--step N\] \[--out DIR\] \[--overwrite\]/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's download refuses a link at a file's path, even a broken one, and --overwrite replaces it, leaving what it points at as it was", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const config = new TextEncoder().encode('{"layers": 2}');
    await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
      step: 3,
      files: [{ name: "config.json", bytes: config }],
    });
    const out = `${dir}/out`;
    await Deno.mkdir(`${out}/step-3`, { recursive: true });
    // A broken link counts as a file there: refused, named, and nothing made where it points.
    await Deno.symlink(`${dir}/nowhere.json`, `${out}/step-3/config.json`);
    const broken = await run(["download", id, "--out", out]).catch((e) => e);
    assert.ok(broken instanceof Error, "a download over a broken link must fail");
    assert.equal(
      broken.message,
      `Cannot download step 3 of job ${id} into ${out} as ${out}/step-3/config.json already ` +
        `exists: give --overwrite to replace it`,
    );
    await assert.rejects(() => Deno.lstat(`${dir}/nowhere.json`), Deno.errors.NotFound);
    // A link to a file outside DIR: --overwrite replaces the link, not the file it points at.
    await Deno.remove(`${out}/step-3/config.json`);
    await Deno.writeTextFile(`${dir}/outside.json`, "mine");
    await Deno.symlink(`${dir}/outside.json`, `${out}/step-3/config.json`);
    const replaced = await run(["download", id, "--out", out, "--overwrite"]);
    assert.equal(replaced.code, 0, replaced.err);
    assert.equal(await Deno.readTextFile(`${dir}/outside.json`), "mine");
    const info = await Deno.lstat(`${out}/step-3/config.json`);
    assert.ok(info.isFile && !info.isSymlink, "config.json must be a file, not a link");
    assert.deepEqual(await Deno.readFile(`${out}/step-3/config.json`), config);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's download into a file where it needs a folder names the file and the flag's folder", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(job), tenantId: fx.tenantA.id }, {
      step: 2,
      files: [{ name: "config.json", bytes: new TextEncoder().encode("{}") }],
    });
    await Deno.writeTextFile(`${dir}/notes.txt`, "mine");
    for (const extra of [[], ["--overwrite"]]) {
      const error = await run(["download", id, "--out", `${dir}/notes.txt`, ...extra])
        .catch((e) => e);
      assert.ok(error instanceof Error, "a download into a file must fail");
      assert.equal(
        error.message,
        `Cannot download step 2 of job ${id} into ${dir}/notes.txt as ${dir}/notes.txt must be a ` +
          `folder: it is a file`,
      );
    }
    assert.equal(await Deno.readTextFile(`${dir}/notes.txt`), "mine");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's download of a step without a checkpoint names the steps that have one", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
    for (const step of [4, 8]) {
      await saveCheckpoint(fx.db, fx.store, writer, {
        step,
        files: [{ name: "config.json", bytes: new TextEncoder().encode("{}") }],
      });
    }
    const missing = await run(["download", id, "--step", "7", "--out", `${dir}/out`])
      .catch((e) => e);
    assert.ok(missing instanceof Error, "a download of a step without a checkpoint must fail");
    assert.equal(
      missing.message,
      `GET /v1/jobs/${id}/checkpoints/7/archive failed with HTTP 404: Cannot find a checkpoint ` +
        `of job ${id} at step 7: its checkpoints are at steps 4, 8`,
    );
    await assert.rejects(() => Deno.stat(`${dir}/out`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test('the CLI\'s download of a job without checkpoints says so, "yet" only while it can still save one', async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const running = await run(["download", id, "--out", `${dir}/out`]).catch((e) => e);
    assert.ok(running instanceof Error, "a download of a job without checkpoints must fail");
    assert.equal(running.message, `Cannot download job ${id} as it has no checkpoints yet`);
    await succeedJob(fx.db, fenceOf(job));
    const ended = await run(["download", id, "--out", `${dir}/out`]).catch((e) => e);
    assert.equal(ended.message, `Cannot download job ${id} as it has no checkpoints`);
    // The same words as the API's 404 for a step asked for.
    const step = await run(["download", id, "--step", "0", "--out", `${dir}/out`])
      .catch((e) => e);
    assert.equal(
      step.message,
      `GET /v1/jobs/${id}/checkpoints/0/archive failed with HTTP 404: Cannot find a checkpoint ` +
        `of job ${id} at step 0: it has no checkpoints`,
    );
    await assert.rejects(() => Deno.stat(`${dir}/out`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI downloads a job's skill library, the latest or a given step, to stdout or a file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const none = await run(["skills", id]).catch((e) => e);
    assert.equal(
      none.message,
      `GET /v1/jobs/${id}/skills failed with HTTP 404: Cannot find a skill library of job ${id}: ` +
        `it has no skill libraries yet`,
    );
    const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
    const library = (step: number, texts: string[]) => ({
      version: 1,
      job_id: id,
      step,
      skills: texts.map((text) => ({ text, summary: "", times_seen: 1 })),
    });
    for (const [step, texts] of [[1, ["push boxes onto targets"]], [3, ["a", "b", "c"]]] as const) {
      const json = library(step, [...texts]);
      await saveSkillLibrary(fx.db, fx.store, writer, { step, json, skillCount: texts.length });
    }
    const latest = await run(["skills", id]);
    assert.equal(latest.code, 0, latest.err);
    assert.deepEqual(JSON.parse(latest.out), library(3, ["a", "b", "c"]));
    assert.equal(latest.err, "skill library of step 3: 3 skills\n");
    const file = `${dir}/skills-1.json`;
    const first = await run(["skills", id, "--step", "1", "--out", file]);
    assert.equal(first.code, 0, first.err);
    assert.equal(first.out, "");
    assert.deepEqual(
      JSON.parse(await Deno.readTextFile(file)),
      library(1, ["push boxes onto targets"]),
    );
    assert.equal(first.err, `skill library of step 1: 1 skill, written to ${file}\n`);
    const missing = await run(["skills", id, "--step", "2"]).catch((e) => e);
    assert.equal(
      missing.message,
      `GET /v1/jobs/${id}/skills?step=2 failed with HTTP 404: Cannot find a skill library of job ` +
        `${id} at step 2: its skill libraries are at steps 1, 3`,
    );
    const fractional = await run(["skills", id, "--step", "1.5"]);
    assert.equal(fractional.code, 2);
    assert.match(
      fractional.err,
      /--step must be a whole number from 0 to 1000000000: current value is "1.5"/,
    );
    assert.equal((await run(["skills"])).code, 2);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's skills refuses to write over a file already there unless given --overwrite", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, json } = await jobWithLibrary(dir, 2, ["plan first"]);
    // A file of the user's where the library would go: kept, and named in the error.
    const file = `${dir}/skills.json`;
    await Deno.writeTextFile(file, "mine");
    const kept = await run(["skills", id, "--out", file]).catch((e) => e);
    assert.ok(kept instanceof Error, "skills over an existing file must fail");
    assert.equal(
      kept.message,
      `Cannot download the skill library of step 2 of job ${id} as ${file} already exists: ` +
        `give --overwrite to replace it`,
    );
    assert.equal(await Deno.readTextFile(file), "mine");
    const replaced = await run(["skills", id, "--out", file, "--overwrite"]);
    assert.equal(replaced.code, 0, replaced.err);
    assert.deepEqual(JSON.parse(await Deno.readTextFile(file)), json);
    const help = await run(["skills", "--help"]);
    assert.match(help.out, /^ {2}skills ID \[--step N\] \[--out FILE\] \[--overwrite\]/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's skills refuses a link at FILE, even a broken one, and --overwrite replaces it, leaving what it points at as it was", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, json } = await jobWithLibrary(dir, 2, ["plan first"]);
    const file = `${dir}/skills.json`;
    // A broken link counts as a file there: refused, named, and nothing made where it points.
    await Deno.symlink(`${dir}/nowhere.json`, file);
    const broken = await run(["skills", id, "--out", file]).catch((e) => e);
    assert.ok(broken instanceof Error, "skills over a broken link must fail");
    assert.equal(
      broken.message,
      `Cannot download the skill library of step 2 of job ${id} as ${file} already exists: ` +
        `give --overwrite to replace it`,
    );
    await assert.rejects(() => Deno.lstat(`${dir}/nowhere.json`), Deno.errors.NotFound);
    // With --overwrite, the broken link and a link to a file outside are each replaced by a file.
    const outside = `${dir}/outside.json`;
    await Deno.writeTextFile(outside, "mine");
    const other = `${dir}/other.json`;
    await Deno.symlink(outside, other);
    for (const path of [file, other]) {
      const replaced = await run(["skills", id, "--out", path, "--overwrite"]);
      assert.equal(replaced.code, 0, replaced.err);
      const info = await Deno.lstat(path);
      assert.ok(info.isFile && !info.isSymlink, `${path} must be a file, not a link`);
      assert.deepEqual(JSON.parse(await Deno.readTextFile(path)), json);
    }
    await assert.rejects(() => Deno.lstat(`${dir}/nowhere.json`), Deno.errors.NotFound);
    assert.equal(await Deno.readTextFile(outside), "mine");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's skills --out names a folder or FIFO at FILE, or a FILE whose folder is missing, as such", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id } = await jobWithLibrary(dir, 4, []);
    const cannot = `Cannot download the skill library of step 4 of job ${id} as`;
    // A folder: --overwrite would not replace it, so the error must not suggest it.
    for (const extra of [[], ["--overwrite"]]) {
      const folder = await run(["skills", id, "--out", dir, ...extra]).catch((e) => e);
      assert.ok(folder instanceof Error, "skills into a folder must fail");
      assert.equal(folder.message, `${cannot} ${dir} must be a file: it is a folder`);
    }
    // A FIFO (as a device such as /dev/null) is not removed by --overwrite, and is named as such.
    const fifo = `${dir}/skills.fifo`;
    const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
    assert.ok(made.success, "mkfifo must make the FIFO");
    for (const extra of [[], ["--overwrite"]]) {
      const error = await run(["skills", id, "--out", fifo, ...extra]).catch((e) => e);
      assert.ok(error instanceof Error, "skills into a FIFO must fail");
      assert.equal(error.message, `${cannot} ${fifo} must be a file: it is a FIFO`);
      assert.ok((await Deno.lstat(fifo)).isFifo, "the FIFO must be left there");
    }
    const missing = await run(["skills", id, "--out", `${dir}/results/skills.json`])
      .catch((e) => e);
    assert.ok(missing instanceof Error, "skills into a missing folder must fail");
    assert.equal(
      missing.message,
      `${cannot} ${dir}/results/skills.json must be in a folder that exists: ${dir}/results is ` +
        `not one`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI follows a job's events until it finishes and exits 0 when it succeeded", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await setProgress(fx.db, fenceOf(job), { stage: "rollout", step: 2, totalSteps: 4, etaS: 30 });
    await appendEvent(fx.db, fenceOf(job), "stage", { stage: "rollout" });
    const following = run(["follow", id]);
    await succeedJob(fx.db, fenceOf(job));
    const res = await following;
    assert.equal(res.code, 0, res.err);
    assert.deepEqual(res.out.trim().split("\n"), [
      "status: queued",
      "status: running",
      "stage: rollout",
      "status: succeeded",
    ]);
    // The bar as follow last drew it: with the ETA while running, none once the job succeeded.
    assert.match(
      res.err,
      /\[#+-*\] 2\/4 {2}(running {2}rollout {2}ETA 30s|succeeded {2}rollout)$/m,
    );
    assert.doesNotMatch(res.err, /succeeded .*ETA/);
    assert.match(res.err, new RegExp(`job ${id} succeeded`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's follow attached mid-stage counts the time in the stage from its stage event, and shows the SFT counter", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await appendEvent(fx.db, fenceOf(job), "stage", { stage: "warmup_policy" });
    // The stage started 70 s before follow attaches.
    await fx.db.query(
      "update job_events set created_at = now() - interval '70 seconds' where job_id = $1 and type = 'stage'",
      [id],
    );
    await setProgress(fx.db, fenceOf(job), {
      stage: "warmup_policy",
      step: 0,
      totalSteps: 10,
      phase: "sft",
      done: 36,
      total: 1120,
      loss: 2.31,
    });
    // list's STEP says the warm-up and its count, as the bar does, not the updates' 0/10.
    const listed = await run(["list", "--limit", "100"]);
    assert.match(listed.out, new RegExp(`^${id} .* warm-up 36/1120 `, "m"));
    // The job ends once follow has printed the stage, so the stage event has been read.
    const { promise: stageShown, resolve } = Promise.withResolvers<void>();
    const following = run(["follow", id], "", (text) => {
      if (text.includes("stage: warmup_policy")) resolve();
    });
    await stageShown;
    await succeedJob(fx.db, fenceOf(job));
    const res = await following;
    assert.equal(res.code, 0, res.err);
    // The bar counts the stage's SFT steps (36 of 1120: 1 of 24 marks), not the updates (0/10).
    assert.match(
      res.err,
      /\[#-{23}\] SFT step 36\/1120 {2}\w+ {2}warmup_policy {2}loss 2\.310 {2}\(1m[1-3]\ds in warmup_policy\)/,
    );
    const status = await run(["status", id]);
    assert.match(status.out, /^progress +\[#-{23}\] SFT step 36\/1120 {2}\w+ {2}warmup_policy/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's follow of a job queued again after its worker was lost says the run it waits for, not the lost run's stage", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await setProgress(fx.db, fenceOf(job), { stage: "rollout", step: 2, totalSteps: 4, etaS: 30 });
    await appendEvent(fx.db, fenceOf(job), "stage", { stage: "rollout" });
    // The stage started 70 s before follow attaches.
    await fx.db.query(
      "update job_events set created_at = now() - interval '70 seconds' where job_id = $1 and type = 'stage'",
      [id],
    );
    const stageShown = Promise.withResolvers<void>();
    const queuedShown = Promise.withResolvers<void>();
    let seenStage = false;
    const following = run(["follow", id], "", (text) => {
      if (text.includes("stage: rollout")) {
        seenStage = true;
        stageShown.resolve();
      }
    }, (text) => {
      // Off a terminal the bar is a line on each change: the first with `queued` after the stage
      // is the requeued job's.
      if (seenStage && text.includes("queued")) queuedShown.resolve();
    });
    await stageShown.promise;
    // The worker stopped heartbeating an hour ago; the reaper queues the job for its second run.
    await fx.db.query(
      "update jobs set lease_expires_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour' where id = $1",
      [id],
    );
    const [reaped] = await reapExpiredLeases(fx.db, {
      now: new Date(Date.now() + 3_600_000),
      limit: 1,
    });
    assert.equal(reaped.id, id);
    await queuedShown.promise;
    await run(["cancel", id]);
    const res = await following;
    assert.equal(res.code, 1, res.err);
    const lines = res.err.split("\n");
    const queued = lines.filter((line) => line.includes("queued"));
    // Cancelled in the queue: the last bar says so, not where the lost run stopped.
    assert.deepEqual(queued, [
      "queued again: run 2 of at most 3",
      "cancelled while queued again: run 2 of at most 3",
    ], res.err);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI follows with --json as one raw event object a line", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await appendEvent(fx.db, fenceOf(job), "stage", { stage: "rollout" });
    const following = run(["follow", id, "--json"]);
    await succeedJob(fx.db, fenceOf(job));
    const res = await following;
    assert.equal(res.code, 0, res.err);
    const events = res.out.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(events.map((e) => e.type), ["status", "status", "stage", "status"]);
    assert.deepEqual(events[2].data, { stage: "rollout" });
    assert.equal(events[3].data.status, "succeeded");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's status shows the key metrics rounded, one a line, and --json all of them", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    const values: Record<string, number> = {
      step: 3,
      success_rate: 0.3750000001,
      "eval/test_seen/success_rate": 0.25,
      loss: -0.000351234,
      kl: 0.0123456789,
      skill_library_size: 12,
      seconds_rollout: 41.123456,
      warmup_policy_first_loss: 7.114285588264465,
    };
    await recordMetrics(fx.db, fenceOf(job), 3, values);
    const res = await run(["status", id]);
    assert.equal(res.code, 0, res.err);
    const metrics = res.out.slice(res.out.indexOf("metrics at step 3:")).split("\n");
    assert.deepEqual(metrics, [
      "metrics at step 3:",
      "  success_rate                 38%",
      "  eval/test_seen/success_rate  25%",
      "  loss                         -0.000351",
      "  kl                           0.0123",
      "  skill_library_size           12",
      `(2 more metrics: seed metrics ${id}; all fields: --json)`,
      "",
    ]);
    assert.match(res.out, /^model +builtin:tiny$/m);
    const json = await run(["status", id, "--json"]);
    assert.deepEqual(JSON.parse(json.out).latest_metrics, values);
    const list = await run(["list", "--limit", "1"]);
    assert.match(list.out.split("\n")[1], / +running +- +.* +success_rate 38%$/);
    await recordMetrics(fx.db, fenceOf(job), 4, { loss: 0.5 });
    const table = await run(["metrics", id]);
    assert.equal(table.code, 0, table.err);
    assert.deepEqual(table.out.split("\n"), [
      "METRIC                       STEP  VALUE",
      "eval/test_seen/success_rate  3     0.25",
      "kl                           3     0.0123",
      "loss                         4     0.5",
      "seconds_rollout              3     41.1",
      "skill_library_size           3     12",
      "success_rate                 3     0.375",
      "warmup_policy_first_loss     3     7.11",
      "",
    ]);
    const raw = JSON.parse((await run(["metrics", id, "--json"])).out);
    assert.deepEqual(raw.points.map((p: { step: number }) => p.step), [3, 4]);
    assert.deepEqual(raw.points[0].values, values);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's status and list show a job queued again after its worker was lost by the run it waits for, without the last run's bar or ETA", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { id, job } = await submitAndClaim(dir);
    await setProgress(fx.db, fenceOf(job), { stage: "rollout", step: 3, totalSteps: 8, etaS: 120 });
    const running = await run(["status", id]);
    assert.match(running.out, /^progress +\[#+-+\] 3\/8 {2}running {2}rollout {2}ETA 2m00s$/m);
    // The worker stopped heartbeating an hour ago (its lease the oldest, so the one reaped); the
    // reaper queues the job for its second run, its progress still the first run's.
    await fx.db.query(
      "update jobs set lease_expires_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour' where id = $1",
      [id],
    );
    const [reaped] = await reapExpiredLeases(fx.db, {
      now: new Date(Date.now() + 3_600_000),
      limit: 1,
    });
    assert.equal(reaped.id, id);
    assert.equal(reaped.status, "queued");
    assert.equal(reaped.attempt, 1);
    assert.equal(reaped.progress?.step, 3);
    const status = await run(["status", id]);
    assert.equal(status.code, 0, status.err);
    assert.match(status.out, /^status +queued \(run 2 of at most 3\)$/m);
    assert.match(status.out, /^progress +queued again: run 2 of at most 3$/m);
    assert.doesNotMatch(status.out, /ETA|3\/8|rollout/);
    const list = await run(["list", "--limit", "100"]);
    const row = list.out.split("\n").find((line) => line.startsWith(id)) ?? "";
    assert.match(row, / +queued +queued again: run 2 of at most 3 +\d{4}-/);
    assert.doesNotMatch(row, /3\/8/);
    // Cancelled there: before run 2, not where run 1 stopped.
    assert.equal((await run(["cancel", id])).code, 0);
    const cancelled = await run(["status", id]);
    assert.match(cancelled.out, /^status +cancelled \(in the queue for run 2 of at most 3\)$/m);
    assert.match(cancelled.out, /^progress +cancelled while queued again: run 2 of at most 3$/m);
    assert.doesNotMatch(cancelled.out, /3\/8|rollout/);
    const listed = await run(["list", "--limit", "100"]);
    const cancelledRow = listed.out.split("\n").find((line) => line.startsWith(id)) ?? "";
    assert.match(cancelledRow, / +cancelled +cancelled while queued again: run 2 of at most 3 +\d/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's 409 for deleting a queued job names seed cancel and the cancel route without nested brackets", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const id = (await run(["submit", `${dir}/spec.json`])).out.trim();
    const error = await run(["delete", id]).catch((e) => e);
    const message = String(error.message);
    assert.match(message, /HTTP 409/);
    assert.ok(
      message.endsWith(
        `it is queued; cancel it first with \`seed cancel ${id}\` or \`POST /v1/jobs/${id}/cancel\``,
      ),
      message,
    );
    assert.doesNotMatch(message, /\([^)]*\(/);
    await run(["cancel", id]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's list refuses --name with --name-prefix as a usage error", async () => {
  const res = await run(["list", "--name", "foo", "--name-prefix", "f"]);
  assert.equal(res.code, 2);
  assert.equal(res.out, "");
  assert.match(
    res.err,
    /^Cannot use --name with --name-prefix in list as they exclude each other: give one of them\n/,
  );
});

Deno.test("the CLI's help says --name and --name-prefix match case-sensitively, without wildcards", async () => {
  const res = await run(["--help"]);
  assert.equal(res.code, 0);
  assert.match(
    res.out,
    /--name: the whole name; --name-prefix: its beginning\. Both are case-sensitive, and\n +% and _ are plain characters \(no wildcards\)\./,
  );
});

Deno.test("the CLI's list pages with the cursor it prints", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await run(["submit", `${dir}/spec.json`])).out.trim());
    const first = await run(["list", "--limit", "2"]);
    assert.deepEqual(first.out.trim().split("\n").slice(1).map((l) => l.split(" ")[0]), [
      ids[2],
      ids[1],
    ]);
    const cursor = first.err.match(/^\(more: seed list --cursor (\S+)\)$/m)?.[1];
    assert.ok(cursor, first.err);
    for (const option of ["--cursor", "--after"]) {
      const next = await run(["list", "--limit", "1", option, cursor]);
      assert.equal(next.code, 0, next.err);
      assert.equal(next.out.trim().split("\n")[1].split(" ")[0], ids[0]);
    }
    for (const id of ids) await run(["cancel", id]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI's list sends an empty --status or --cursor, which the API refuses, rather than listing every job", async () => {
  for (const args of [["--status", ""], ["--status="], ["--cursor", ""], ["--after="]]) {
    const failed = await run(["list", ...args]).then(
      (r) => `exit ${r.code}: ${r.out}`,
      (e) => String(e),
    );
    const name = args[0].startsWith("--status") ? "status" : "cursor";
    assert.match(failed, /^ApiError: GET \/v1\/jobs\?\S+ failed with HTTP 400/, args.join(" "));
    assert.match(failed, new RegExp(`violates the schema at \`${name}`), args.join(" "));
  }
});

Deno.test("the CLI's 401 says to set SEED_API_KEY and where keys come from, a refused connection which URL", async () => {
  for (const key of [undefined, "seed_not-a-key"]) {
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "api/client/cli.ts", "list"],
      env: { SEED_API_URL: env.SEED_API_URL, ...(key ? { SEED_API_KEY: key } : {}) },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(child.code, 1);
    const err = new TextDecoder().decode(child.stderr);
    assert.match(err, /^seed: GET \/v1\/jobs failed with HTTP 401/);
    assert.match(
      err,
      key ? /the key in SEED_API_KEY is not one this API knows/ : /SEED_API_KEY is not set/,
    );
    assert.match(err, /deno task keys create --tenant NAME/);
    assert.ok(err.includes(env.SEED_API_URL));
  }
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${closed.addr.port}`;
  closed.close();
  const child = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "api/client/cli.ts", "list"],
    env: { SEED_API_URL: url, SEED_API_KEY: "seed_x" },
    clearEnv: true,
    stderr: "piped",
  }).output();
  assert.equal(child.code, 1);
  assert.match(
    new TextDecoder().decode(child.stderr),
    new RegExp(`cannot reach the API at ${url} \\(set SEED_API_URL`),
  );
});

Deno.test("deno task seed reads paths from the caller's folder, not the repository root", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["task", "--config", `${Deno.cwd()}/deno.json`, "seed", "--", "submit", "spec.json"],
      cwd: dir,
      // A fresh environment: `deno task` keeps an INIT_CWD it inherits (the test runner's own).
      clearEnv: true,
      env: { ...env, PATH: Deno.env.get("PATH") ?? "", HOME: Deno.env.get("HOME") ?? dir },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(child.stderr);
    assert.equal(child.code, 0, err);
    const id = new TextDecoder().decode(child.stdout).trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    await run(["cancel", id]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI stores a secret from stdin, lists its name only and deletes it", async () => {
  const value = "sk-cli-0c9e71b3";
  const put = await run(["secrets", "put", "annotator"], `${value}\n`);
  assert.equal(put.code, 0, put.err);
  assert.ok(!put.out.includes(value) && !put.err.includes(value));
  const list = await run(["secrets", "list"]);
  assert.match(list.out, /^annotator\t\d{4}-/);
  assert.ok(!list.out.includes(value));
  const [row] = await fx.db.query<{ ciphertext: string }>(
    "select ciphertext from tenant_secrets where tenant_id = $1::uuid and name = 'annotator'",
    [fx.tenantA.id],
  );
  assert.ok(row && !row.ciphertext.includes(value));
  assert.equal((await run(["secrets", "delete", "annotator"])).code, 0);
  assert.equal((await run(["secrets", "list"])).out, "");
  assert.equal((await run(["secrets", "put"])).code, 2);
});

Deno.test("the CLI prints the problem detail and exits 1 on an HTTP error", async () => {
  const child = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "api/client/cli.ts", "status", crypto.randomUUID()],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(child.code, 1);
  const err = new TextDecoder().decode(child.stderr);
  assert.match(err, /^seed: GET \/v1\/jobs\/[0-9a-f-]+ failed with HTTP 404: Cannot find job/);
  const usage = await run(["status"]);
  assert.equal(usage.code, 2);
  assert.match(usage.err, /^Usage:/);
});

Deno.test("the CLI takes a job id's unique start of 8 hex digits wherever it takes a job id", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const head = crypto.randomUUID().slice(0, 8);
    const ids = [`${head}-aaaa-4000-8000-000000000001`, `${head}-abcd-4000-8000-000000000002`];
    for (const [i, id] of ids.entries()) {
      const submitted = await run(["submit", `${dir}/spec.json`, "--name", `twin-${i}`]);
      await renameJobId(fx.db, submitted.out.trim(), id);
    }
    // The start the dashboard shows is two jobs' start: an error listing both, nothing done.
    const both = await run(["cancel", head]).catch((e) => e);
    assert.ok(both instanceof Error, "an ambiguous start must fail");
    assert.match(
      both.message,
      new RegExp(`^Cannot tell which job ${head} is as 2 jobs' ids start`),
    );
    assert.match(both.message, new RegExp(`\n  ${ids[1]}  twin-1  queued  \\d{4}-`));
    assert.match(both.message, new RegExp(`\n  ${ids[0]}  twin-0  queued  \\d{4}-`));
    // One more digit tells them apart, for every command that names a job.
    const status = await run(["status", `${head}-ab`]);
    assert.equal(status.code, 0, status.err);
    assert.match(status.out, new RegExp(`^job +${ids[1]}$`, "m"));
    const metrics = await run(["metrics", `${head}AB`]);
    assert.equal(metrics.code, 0, metrics.err);
    assert.equal(metrics.err, "no metrics yet\n");
    const skills = await run(["skills", `${head}ab`]).catch((e) => e);
    assert.match(String(skills), new RegExp(`/v1/jobs/${ids[1]}/skills failed with HTTP 404`));
    const download = await run(["download", `${head}ab`]).catch((e) => e);
    assert.equal(download.message, `Cannot download job ${ids[1]} as it has no checkpoints yet`);
    const cancel = await run(["cancel", `${head}ab`]);
    assert.equal(cancel.out, `${ids[1]}\tcancelled\n`);
    const follow = await run(["follow", `${head}ab`]);
    assert.equal(follow.code, 1);
    assert.match(follow.err, new RegExp(`job ${ids[1]} cancelled\n$`));
    const deleted = await run(["delete", `${head}ab`]);
    assert.equal(deleted.out, `${ids[1]}\tdeleted\n`);
    // With the other gone, the 8 digits name one job.
    assert.match((await run(["status", head])).out, new RegExp(`^job +${ids[0]}$`, "m"));
    // The whole id works as before.
    assert.match((await run(["status", ids[0]])).out, new RegExp(`^job +${ids[0]}$`, "m"));
    await run(["cancel", ids[0]]);
    const none = await run(["status", `${head}-b`]).catch((e) => e);
    assert.equal(
      none.message,
      `Cannot find job ${head}-b: no job of this tenant has an id starting with it`,
    );
    // Fewer than 8 digits: a usage error naming what was typed (cli_args_test.ts has the rest).
    const short = await run(["status", head.slice(0, 7)]);
    assert.equal(short.code, 2);
    assert.match(
      short.err,
      new RegExp(`^Cannot use job id "${head.slice(0, 7)}" as it must be a job id or its first 8 `),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI names its own --limit and --step when they are not whole numbers, a usage error (exit 2)", async () => {
  for (const bad of ["abc", "0", "101", "1e1", "0x10", ""]) {
    const res = await run(["list", "--limit", bad]);
    assert.equal(res.code, 2, `--limit ${bad}`);
    assert.equal(res.out, "");
    assert.equal(
      res.err,
      `Cannot list jobs as --limit must be a whole number from 1 to 100: current value is ${
        JSON.stringify(bad)
      }\n`,
    );
  }
  assert.equal((await run(["list", "--limit", "1"])).code, 0);
  const step = await run(["download", crypto.randomUUID(), "--step=-1"]);
  assert.equal(step.code, 2);
  assert.equal(
    step.err,
    'Cannot download as --step must be a whole number from 0 to 1000000000: current value is "-1"\n',
  );
  const skillsStep = await run(["skills", crypto.randomUUID(), "--step", "2.5"]);
  assert.equal(skillsStep.code, 2);
  assert.match(skillsStep.err, /^Cannot download skills as --step must be a whole number/);
});

Deno.test("every flag the CLI cannot use is a usage error (exit 2) naming it, before any request", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/spec.json`, JSON.stringify({ env: { id: "sokoban" } }));
    const before = (await run(["list", "--limit", "100"])).out;
    // A --metadata without "=": for list and for submit, which then submits nothing.
    for (const args of [["list"], ["submit", `${dir}/spec.json`]]) {
      const res = await run([...args, "--metadata", "team"]);
      assert.equal(res.code, 2, args[0]);
      assert.equal(res.out, "");
      assert.equal(
        res.err,
        'Cannot use --metadata "team" as it must be KEY=VALUE with a non-empty key\n',
      );
      assert.equal((await run([...args, "--metadata", "=x"])).code, 2);
    }
    assert.equal((await run(["list", "--limit", "100"])).out, before, "no job was submitted");
    // An option the CLI does not know, or one without its value: the usage follows.
    const unknown = await run(["list", "--limt", "5"]);
    assert.equal(unknown.code, 2);
    assert.match(
      unknown.err,
      /^Cannot use --limt as it is not an option of seed \(seed --help lists them\)\n/,
    );
    assert.match(unknown.err, /\nUsage: seed <command>/);
    const missing = await run(["list", "--limit"]);
    assert.equal(missing.code, 2);
    assert.match(
      missing.err,
      /^Cannot use --limit as it needs a value after it\n/,
    );
    const valued = await run(["list", "--json=yes"]);
    assert.equal(valued.code, 2);
    assert.match(
      valued.err,
      /^Cannot use --json with a value as it takes none\n/,
    );
    // A value starting with a dash, space-separated: node reads it as an option.
    const dashed = await run(["list", "--limit", "-1"]);
    assert.equal(dashed.code, 2);
    assert.match(
      dashed.err,
      /^Cannot use --limit with a value that starts with a dash unless it is written --limit=VALUE\n/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the seed command exits 2 for a bad --limit, as for a malformed job id", async () => {
  for (const args of [["list", "--limit", "0"], ["list", "--bogus"], ["status", "xyz"]]) {
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "api/client/cli.ts", ...args],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(child.stderr);
    assert.equal(child.code, 2, `${args.join(" ")}: ${err}`);
    assert.match(err, /^Cannot /);
    assert.doesNotMatch(err, /^seed: /);
  }
});

Deno.test({
  name: "stop the CLI test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});

Deno.test("the CLI's submit names the spec file when it is missing, not JSON, or not an object", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const missing = await run(["submit", `${dir}/nope.json`]).catch((e) => e);
    assert.ok(missing instanceof Error);
    assert.match(missing.message, new RegExp(`^Cannot read the JobSpec file ${dir}/nope\\.json: `));
    await Deno.writeTextFile(`${dir}/comma.json`, '{"env": {"id": "sokoban"},}');
    const comma = await run(["submit", `${dir}/comma.json`]).catch((e) => e);
    assert.ok(comma instanceof Error);
    assert.match(
      comma.message,
      new RegExp(
        `^Cannot read the JobSpec file ${dir}/comma\\.json as it must be JSON: .*position 26`,
      ),
    );
    await Deno.writeTextFile(`${dir}/null.json`, "null");
    const nul = await run(["submit", `${dir}/null.json`, "--name", "x"]).catch((e) => e);
    assert.ok(nul instanceof Error);
    assert.equal(
      nul.message,
      `Cannot read the JobSpec file ${dir}/null.json as it must hold a JSON object such as ` +
        `{"env": {"id": "sokoban"}}: it holds null`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
