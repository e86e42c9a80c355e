import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { decode } from "fast-png";
import {
  createLogger,
  fenceOf,
  listTrajectoryDumpSummaries,
  saveTrajectoryDump,
} from "../../jobs/mod.ts";
import type { SplitEval } from "../../workers/seed/evaluate.ts";
import { evalDump, rolloutDump } from "../../workers/seed/run/trajectory_dump.ts";
import { imageTrajectories } from "../workers/seed/run/_image_trajectories.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

// The 502 test logs otherwise.
const fx = await startApiFixture({ log: createLogger({}, { sink: () => {} }) });
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

// One running job of tenant A with dumps written by the worker's own writer: step 1 has two
// training rollouts (2 turns each, every observation an image) and an evaluation of 2 test_seen
// + 1 test_unseen episodes; step 2 has rollouts only.
const job = await runningJob(fx, fx.keyA);
const writer = { fence: fenceOf(job), tenantId: fx.tenantA.id };
const rollouts = imageTrajectories(2, { actions: ["up", "left"] });
const evals = [
  ...imageTrajectories(2, { split: "test_seen", actions: ["down"] }),
  ...imageTrajectories(1, { split: "test_unseen", actions: ["right"] }),
];
const splits: SplitEval[] = [
  { split: "test_seen", episodes: 2, success_rate: 0, score: -0.1, mean_turns: 1, families: {} },
  { split: "test_unseen", episodes: 1, success_rate: 0, score: -0.1, mean_turns: 1, families: {} },
];
const rollout1 = rolloutDump(job.id, 1, rollouts);
await saveTrajectoryDump(fx.db, fx.store, writer, rollout1);
await saveTrajectoryDump(
  fx.db,
  fx.store,
  writer,
  evalDump(job.id, 1, { splits, trajectories: evals }),
);
await saveTrajectoryDump(fx.db, fx.store, writer, rolloutDump(job.id, 2, rollouts.slice(0, 1)));

const base = `/v1/jobs/${job.id}/trajectories`;
const get = (path: string, key = fx.keyA) => req(fx.app, "GET", path, { key });

interface Turn {
  turn: number;
  action: string;
  image: { name: string; url: string; width: number; height: number; sha256: string } | null;
}
interface Traj {
  source: string;
  split: string;
  group: number;
  task_id: string;
  turns: number;
  steps: Turn[];
}

Deno.test("without a step the route lists the steps that have trajectories", async () => {
  const res = await get(base);
  assert.equal(res.status, 200);
  const { steps } = await res.json();
  assert.deepEqual(steps.map((s: { step: number }) => s.step), [1, 2]);
  assert.equal(steps[0].rollout.trajectories, 2);
  assert.equal(steps[0].rollout.images, 4);
  assert.equal(steps[0].eval.trajectories, 3);
  assert.equal(steps[1].rollout.trajectories, 1);
  assert.equal(steps[1].eval, null);
  assert.doesNotMatch(JSON.stringify(steps), /tenants\//);
});

Deno.test("the listing reads image counts, not every dump's image list", async () => {
  const summaries = await listTrajectoryDumpSummaries(fx.db, job.id);
  assert.deepEqual(summaries.map((d) => [d.step, d.kind, d.imageCount, d.trajectoryCount]), [
    [1, "eval", 3, 3],
    [1, "rollout", 4, 2],
    [2, "rollout", 2, 1],
  ]);
  for (const d of summaries) assert.equal("images" in d, false);
});

Deno.test("a step's trajectories come with their fields, eval results and image links", async () => {
  const res = await get(`${base}?step=1`);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.step, 1);
  assert.equal(body.split, null);
  assert.deepEqual(body.totals, { rollout: 2, eval: 3 });
  assert.deepEqual(body.eval, splits);
  const list = body.trajectories as Traj[];
  assert.deepEqual(list.map((t) => [t.source, t.split]), [
    ["eval", "test_seen"],
    ["eval", "test_seen"],
    ["eval", "test_unseen"],
    ["rollout", "train"],
    ["rollout", "train"],
  ]);
  const first = list[3];
  assert.equal(first.task_id, rollouts[0].task.id);
  assert.equal(first.turns, 2);
  assert.deepEqual(first.steps.map((s) => s.action), ["up", "left"]);
  const image = first.steps[1].image!;
  assert.equal(image.name, "rollout-0-1.png");
  assert.equal(image.url, `${base}/1/images/rollout-0-1.png`);
  assert.equal(image.width, rollouts[0].steps[1].images![0].width);
  assert.equal(image.sha256, sha(rollout1.images[1].bytes));
  assert.doesNotMatch(JSON.stringify(body), /tenants\//);
});

Deno.test("the split filter keeps only that split's trajectories", async () => {
  const body = await (await get(`${base}?step=1&split=test_seen`)).json();
  assert.equal(body.split, "test_seen");
  assert.deepEqual(body.trajectories.map((t: Traj) => t.split), ["test_seen", "test_seen"]);
  const train = await (await get(`${base}?step=2&split=train`)).json();
  assert.equal(train.trajectories.length, 1);
  const none = await (await get(`${base}?step=2&split=test_unseen`)).json();
  assert.deepEqual(none.trajectories, []);
});

Deno.test("an image link serves the PNG: right size, pixels and SHA-256", async () => {
  const body = await (await get(`${base}?step=1`)).json();
  for (const turn of (body.trajectories as Traj[]).flatMap((t) => t.steps)) {
    const res = await get(turn.image!.url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "image/png");
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(sha(bytes), turn.image!.sha256);
    assert.equal(res.headers.get("etag"), `"${turn.image!.sha256}"`);
    const png = decode(bytes);
    assert.deepEqual([png.width, png.height], [turn.image!.width, turn.image!.height]);
  }
  const res = await get(`${base}/1/images/rollout-1-0.png`);
  const png = decode(new Uint8Array(await res.arrayBuffer()));
  assert.deepEqual(new Uint8Array(png.data), rollouts[1].steps[0].images![0].rgb);
});

Deno.test("a stored image that no longer matches its SHA-256 is a 502, not wrong bytes", async () => {
  const j = await runningJob(fx, fx.keyA);
  const w = { fence: fenceOf(j), tenantId: fx.tenantA.id };
  const row = await saveTrajectoryDump(fx.db, fx.store, w, rolloutDump(j.id, 1, rollouts));
  await fx.store.put(row.images[0].key, new Uint8Array([1, 2, 3])); // bit rot behind our back
  const res = await get(`/v1/jobs/${j.id}/trajectories/1/images/${row.images[0].name}`);
  assert.equal(res.status, 502);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
});

Deno.test("a malformed step or split is a 400 naming the field", async () => {
  for (
    const [query, field] of [["step=abc", "step"], ["step=-1", "step"], ["step=1.5", "step"], [
      "step=1&split=valid",
      "split",
    ], ["steps=1", ""]]
  ) {
    const res = await get(`${base}?${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
    const body = await res.json();
    assert.equal(body.errors[0].path, field, query);
  }
});

Deno.test("an empty, blank, hex or exponent step is a 400, not read as a number", async () => {
  // z.coerce.number() read `?step=` and `?step=%20` as step 0 (a 404 "at step 0") and
  // `0x1`/`1e0` as step 1 (a 200).
  for (const value of ["", "%20", "0x1", "1e0", "+1", "99999999999"]) {
    const res = await get(`${base}?step=${value}`);
    assert.equal(res.status, 400, value);
    const body = await res.json();
    assert.equal(body.errors[0].path, "step", value);
    assert.match(body.errors[0].message, /decimal digits/, value);
  }
  // The same rule in the path: a 400 at `step` (it was a 404, as if the step had no images).
  for (const path of ["0x1/images/rollout-0-0.png", "1e0/images/rollout-0-0.png"]) {
    const res = await get(`${base}/${path}`);
    assert.equal(res.status, 400, path);
    assert.equal((await res.json()).errors[0].path, "step", path);
  }
  assert.equal((await get(`${base}/1/images/rollout-0-0.png`)).status, 200);
});

Deno.test("a split without a step is a 400 at split, not silently ignored by the step listing", async () => {
  const res = await get(`${base}?split=train`);
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.errors[0].path, "split");
  assert.match(body.errors[0].message, /needs step/);
});

Deno.test("a step without trajectories and an unknown image are 404 problems", async () => {
  const res = await get(`${base}?step=7`);
  assert.equal(res.status, 404);
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  assert.match((await res.json()).detail, /step 7/);
  for (const path of ["2/images/rollout-1-0.png", "1/images/nope.png"]) {
    assert.equal((await get(`${base}/${path}`)).status, 404, path);
  }
});

Deno.test("another tenant gets 404 for the listing, a step and an image", async () => {
  for (const path of [base, `${base}?step=1`, `${base}/1/images/rollout-0-0.png`]) {
    const res = await get(path, fx.keyB);
    assert.equal(res.status, 404, path);
    assert.equal(res.headers.get("content-type"), "application/problem+json");
  }
  assert.equal((await req(fx.app, "GET", base)).status, 401);
});

Deno.test("the OpenAPI document describes both trajectory routes", async () => {
  const doc = await (await req(fx.app, "GET", "/openapi.json")).json();
  const list = doc.paths["/v1/jobs/{id}/trajectories"].get;
  assert.deepEqual(list.parameters.map((p: { name: string }) => p.name), ["id", "step", "split"]);
  const image = doc.paths["/v1/jobs/{id}/trajectories/{step}/images/{name}"].get;
  assert.ok(image.responses["200"].content["image/png"]);
  assert.ok(doc.components.schemas.Trajectories.properties.trajectories);
});

Deno.test({
  name: "trajectory fixture teardown",
  fn: async () => await fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
