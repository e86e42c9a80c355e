import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { fenceOf, saveCheckpoint, saveSkillLibrary, succeedJob } from "../../jobs/mod.ts";
import { extractVerified } from "../../api/client/extract.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

const model = new Uint8Array(randomBytes(300_000));
const config = new TextEncoder().encode(JSON.stringify({ architectures: ["LlamaForCausalLM"] }));
const job = await runningJob(fx, fx.keyA);
const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
await saveCheckpoint(fx.db, fx.store, writer, {
  step: 2,
  files: [{ name: "config.json", bytes: config }, { name: "model.safetensors", bytes: model }],
});
await saveCheckpoint(fx.db, fx.store, writer, {
  step: 4,
  files: [{ name: "config.json", bytes: config }],
});
// A LoRA checkpoint's layout: the adapter at the top, the merged weights in merged/.
const adapterConfig = new TextEncoder().encode(JSON.stringify({ peft_type: "LORA" }));
await saveCheckpoint(fx.db, fx.store, writer, {
  step: 6,
  files: [
    { name: "adapter_config.json", bytes: adapterConfig },
    { name: "merged/config.json", bytes: config },
    { name: "merged/model.safetensors", bytes: model },
  ],
});
const skills2 = { skills: [{ text: "push boxes along walls", success: true }] };
const skills4 = { skills: [{ text: "avoid corners" }, { text: "plan first" }] };
await saveSkillLibrary(fx.db, fx.store, writer, { step: 2, json: skills2, skillCount: 1 });
await saveSkillLibrary(fx.db, fx.store, writer, { step: 4, json: skills4, skillCount: 2 });

Deno.test("checkpoints are listed with their files, sizes and hashes but no object keys", async () => {
  const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints`, { key: fx.keyA });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body.checkpoints.map((c: { step: number }) => c.step), [2, 4, 6]);
  assert.deepEqual(body.checkpoints[0].files, [
    { name: "config.json", bytes: config.byteLength, sha256: sha(config) },
    { name: "model.safetensors", bytes: model.byteLength, sha256: sha(model) },
  ]);
  assert.doesNotMatch(JSON.stringify(body), /tenants\//);
});

Deno.test("the checkpoint archive extracts to exactly the uploaded bytes", async () => {
  const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/2/archive`, {
    key: fx.keyA,
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/x-tar");
  const dir = await Deno.makeTempDir();
  try {
    const files = await extractVerified(res.body!, dir);
    assert.deepEqual(files.map((f) => f.name), ["step-2/config.json", "step-2/model.safetensors"]);
    assert.deepEqual(await Deno.readFile(`${dir}/step-2/model.safetensors`), model);
    assert.deepEqual(await Deno.readFile(`${dir}/step-2/config.json`), config);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a checkpoint's merged/ folder is a folder of the archive and of single-file downloads", async () => {
  const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/6/archive`, {
    key: fx.keyA,
  });
  const dir = await Deno.makeTempDir();
  try {
    const files = await extractVerified(res.body!, dir);
    assert.deepEqual(files.map((f) => f.name), [
      "step-6/adapter_config.json",
      "step-6/merged/config.json",
      "step-6/merged/model.safetensors",
    ]);
    assert.deepEqual(await Deno.readFile(`${dir}/step-6/merged/model.safetensors`), model);
    assert.deepEqual(await Deno.readFile(`${dir}/step-6/adapter_config.json`), adapterConfig);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  // The slash as it is, or encoded.
  for (const name of ["merged/model.safetensors", "merged%2Fmodel.safetensors"]) {
    const file = await req(
      fx.app,
      "GET",
      `/v1/jobs/${job.id}/checkpoints/6/files/${name}?redirect=false`,
      { key: fx.keyA },
    );
    assert.equal(file.status, 200, name);
    const download = await fetch((await file.json()).url);
    assert.deepEqual(new Uint8Array(await download.arrayBuffer()), model);
  }
  for (
    const name of ["merged%2F..%2Fadapter_config.json", "config.json", "merged/adapter_config.json"]
  ) {
    const missing = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/6/files/${name}`, {
      key: fx.keyA,
    });
    assert.equal(missing.status, 404, name);
    await missing.body?.cancel();
  }
});

Deno.test("an archive whose stored object was altered is cut short instead of completed", async () => {
  const j = await runningJob(fx, fx.keyA);
  const w = { fence: fenceOf(j), tenantId: fx.tenantA.id };
  const ckpt = await saveCheckpoint(fx.db, fx.store, w, {
    step: 1,
    files: [{ name: "model.safetensors", bytes: new Uint8Array(5000).fill(1) }],
  });
  await fx.store.put(ckpt.files[0].key, new Uint8Array(5000).fill(2)); // bit rot behind our back
  const res = await req(fx.app, "GET", `/v1/jobs/${j.id}/checkpoints/1/archive`, { key: fx.keyA });
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(() => extractVerified(res.body!, dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a presigned file URL works with plain fetch and carries an expiry", async () => {
  const res = await req(
    fx.app,
    "GET",
    `/v1/jobs/${job.id}/checkpoints/2/files/model.safetensors?redirect=false&expires_in=60`,
    { key: fx.keyA },
  );
  assert.equal(res.status, 200);
  const { url, expires_at } = await res.json();
  const ms = Date.parse(expires_at) - Date.now();
  assert.ok(ms > 50_000 && ms <= 60_000, `expires in ${ms} ms`);
  assert.match(url, /X-Amz-Expires=60/);
  const download = await fetch(url);
  assert.equal(download.status, 200);
  assert.deepEqual(new Uint8Array(await download.arrayBuffer()), model);
  const redirect = await req(
    fx.app,
    "GET",
    `/v1/jobs/${job.id}/checkpoints/2/files/config.json`,
    { key: fx.keyA },
  );
  assert.equal(redirect.status, 302);
  const viaRedirect = await fetch(redirect.headers.get("location")!);
  assert.deepEqual(new Uint8Array(await viaRedirect.arrayBuffer()), config);
});

Deno.test("a step in the path that is no whole number is a 400 naming the step parameter, on every route that takes one", async () => {
  for (const raw of ["abc", "1.5", "-1", "1e3", "0x10", "%20" + "2", "99999999999"]) {
    for (
      const path of [
        `/v1/jobs/${job.id}/checkpoints/${raw}`,
        `/v1/jobs/${job.id}/checkpoints/${raw}/archive`,
        `/v1/jobs/${job.id}/checkpoints/${raw}/files/config.json`,
        `/v1/jobs/${job.id}/trajectories/${raw}/images/rollout-0-0.png`,
      ]
    ) {
      const res = await req(fx.app, "GET", path, { key: fx.keyA });
      const text = await res.text();
      assert.equal(res.status, 400, `${path}: ${text}`);
      const body = JSON.parse(text);
      assert.equal(body.errors[0].path, "step", path);
      assert.match(body.detail, /step path parameter as it must be a whole number/);
    }
  }
  // A well-formed step: the checkpoint's own view, the same as its entry in the list.
  const one = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/2`, { key: fx.keyA });
  assert.equal(one.status, 200);
  const list = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints`, {
    key: fx.keyA,
  })).json();
  assert.deepEqual(await one.json(), list.checkpoints.find((c: { step: number }) => c.step === 2));
  // Leading zeros are read as the number, however many (up to 32 digits).
  for (const raw of ["02", "0000000000000000000002", "0".repeat(31) + "2"]) {
    const padded = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/${raw}`, {
      key: fx.keyA,
    });
    assert.equal(padded.status, 200, `${raw}: ${await padded.clone().text()}`);
    assert.equal((await padded.json()).step, 2);
  }
  const tooLong = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/${"0".repeat(32)}2`, {
    key: fx.keyA,
  });
  assert.equal(tooLong.status, 400);
  // Another tenant's job is still a 404 first, whatever the step.
  const other = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/abc`, { key: fx.keyB });
  assert.equal(other.status, 404);
  await other.body?.cancel();
});

Deno.test("unknown checkpoints, files and other tenants' checkpoints are 404", async () => {
  for (
    const path of [
      `/v1/jobs/${job.id}/checkpoints/3/archive`,
      `/v1/jobs/${job.id}/checkpoints/3`,
      `/v1/jobs/${job.id}/checkpoints/2/files/optimizer.safetensors`,
      `/v1/jobs/${job.id}/checkpoints/2/files/..%2F..%2Fsecret`,
      `/v1/jobs/${job.id}/skills?step=3`,
    ]
  ) {
    const res = await req(fx.app, "GET", path, { key: fx.keyA });
    assert.equal(res.status, 404, path);
    await res.body?.cancel();
  }
  for (const path of ["/checkpoints/2/archive", "/checkpoints/2/files/config.json", "/skills"]) {
    const res = await req(fx.app, "GET", `/v1/jobs/${job.id}${path}`, { key: fx.keyB });
    assert.equal(res.status, 404, path);
    await res.body?.cancel();
  }
  const bad = await req(
    fx.app,
    "GET",
    `/v1/jobs/${job.id}/checkpoints/2/files/config.json?expires_in=999999`,
    { key: fx.keyA },
  );
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).errors[0].path, "expires_in");
});

Deno.test("a step without a checkpoint is a 404 naming the steps that have one, on every checkpoint route", async () => {
  for (const path of ["3", "3/archive", "3/files/config.json"]) {
    const res = await req(fx.app, "GET", `/v1/jobs/${job.id}/checkpoints/${path}`, {
      key: fx.keyA,
    });
    assert.equal(res.status, 404, path);
    assert.equal(
      (await res.json()).detail,
      `Cannot find a checkpoint of job ${job.id} at step 3: its checkpoints are at steps 2, 4, 6`,
      path,
    );
  }
  const empty = await runningJob(fx, fx.keyA);
  const res = await req(fx.app, "GET", `/v1/jobs/${empty.id}/checkpoints/0/archive`, {
    key: fx.keyA,
  });
  assert.equal(res.status, 404);
  assert.equal(
    (await res.json()).detail,
    `Cannot find a checkpoint of job ${empty.id} at step 0: it has no checkpoints yet`,
  );
  // One checkpoint: named in the singular.
  await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(empty), tenantId: fx.tenantA.id }, {
    step: 3,
    files: [{ name: "config.json", bytes: config }],
  });
  const one = await req(fx.app, "GET", `/v1/jobs/${empty.id}/checkpoints/5`, { key: fx.keyA });
  assert.equal(one.status, 404);
  assert.equal(
    (await one.json()).detail,
    `Cannot find a checkpoint of job ${empty.id} at step 5: its only checkpoint is at step 3`,
  );
  // Past 20 checkpoints the 20 nearest the step asked for are named, with the count.
  const many = await runningJob(fx, fx.keyA);
  for (let step = 0; step <= 48; step += 2) {
    await saveCheckpoint(fx.db, fx.store, { fence: fenceOf(many), tenantId: fx.tenantA.id }, {
      step,
      files: [{ name: "config.json", bytes: config }],
    });
  }
  const detail = async (step: number) =>
    (await (await req(fx.app, "GET", `/v1/jobs/${many.id}/checkpoints/${step}`, {
      key: fx.keyA,
    })).json()).detail;
  const evens = (from: number, to: number) =>
    Array.from({ length: (to - from) / 2 + 1 }, (_, i) => from + 2 * i).join(", ");
  assert.equal(
    await detail(25),
    `Cannot find a checkpoint of job ${many.id} at step 25: its checkpoints are at steps …, ${
      evens(6, 44)
    }, … (of 25)`,
  );
  assert.equal(
    await detail(1001),
    `Cannot find a checkpoint of job ${many.id} at step 1001: its checkpoints are at steps …, ${
      evens(10, 48)
    } (of 25)`,
  );
});

Deno.test("the skill library is the latest by default or the one at ?step=", async () => {
  const latest = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/skills`, { key: fx.keyA }))
    .json();
  assert.equal(latest.step, 4);
  assert.equal(latest.skill_count, 2);
  assert.deepEqual(latest.library, skills4);
  const at2 = await (await req(fx.app, "GET", `/v1/jobs/${job.id}/skills?step=2`, {
    key: fx.keyA,
  })).json();
  assert.deepEqual(at2.library, skills2);
  const bad = await req(fx.app, "GET", `/v1/jobs/${job.id}/skills?step=-1`, { key: fx.keyA });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).errors[0].path, "step");
});

Deno.test("a step without a skill library is a 404 naming the steps that have one", async () => {
  const detail = async (jobId: string, query: string) => {
    const res = await req(fx.app, "GET", `/v1/jobs/${jobId}/skills${query}`, { key: fx.keyA });
    assert.equal(res.status, 404, query);
    return (await res.json()).detail;
  };
  assert.equal(
    await detail(job.id, "?step=3"),
    `Cannot find a skill library of job ${job.id} at step 3: its skill libraries are at steps 2, 4`,
  );
  // A job without one: "yet" while it may still save one, not once it has ended.
  const empty = await runningJob(fx, fx.keyA);
  assert.equal(
    await detail(empty.id, ""),
    `Cannot find a skill library of job ${empty.id}: it has no skill libraries yet`,
  );
  assert.equal(
    await detail(empty.id, "?step=0"),
    `Cannot find a skill library of job ${empty.id} at step 0: it has no skill libraries yet`,
  );
  await succeedJob(fx.db, fenceOf(empty));
  assert.equal(
    await detail(empty.id, "?step=0"),
    `Cannot find a skill library of job ${empty.id} at step 0: it has no skill libraries`,
  );
  // One library: named in the singular.
  const one = await runningJob(fx, fx.keyA);
  await saveSkillLibrary(fx.db, fx.store, { fence: fenceOf(one), tenantId: fx.tenantA.id }, {
    step: 3,
    json: skills2,
    skillCount: 1,
  });
  assert.equal(
    await detail(one.id, "?step=5"),
    `Cannot find a skill library of job ${one.id} at step 5: its only skill library is at step 3`,
  );
  // Past 20 libraries the 20 nearest the step asked for are named, with the count.
  const many = await runningJob(fx, fx.keyA);
  for (let step = 1; step <= 21; step++) {
    await saveSkillLibrary(fx.db, fx.store, { fence: fenceOf(many), tenantId: fx.tenantA.id }, {
      step,
      json: skills2,
      skillCount: 1,
    });
  }
  const steps = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, i) => from + i).join(", ");
  assert.equal(
    await detail(many.id, "?step=0"),
    `Cannot find a skill library of job ${many.id} at step 0: its skill libraries are at steps ${
      steps(1, 20)
    }, … (of 21)`,
  );
});

Deno.test({
  name: "close the artifact route fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
