/**
 * Which links of a submit's base chain it needs, against the real Postgres: the links loading the
 * base reads (jobs/_rows.ts `baseChain`). A job's checkpoint with full weights (a full fine-tune,
 * or LoRA with `save_merged`) loads alone, so the jobs it was trained from may go; an adapter-only
 * LoRA checkpoint needs the base it applies to, so that base is held by a queued job and refused
 * when gone; and a chain of more adapter-only jobs in a row than the worker loads
 * (`MAX_ADAPTER_CHAIN`, 8) is refused at submit, as is an adapter-only job whose own checkpoints
 * would make one.
 */
import assert from "node:assert/strict";
import { fenceOf, MAX_ADAPTER_CHAIN, parseJobSpec, submitJob, succeedJob } from "../../jobs/mod.ts";
import { claimAs, req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

/**
 * How a job's checkpoints hold its model: full weights, or only a LoRA adapter (with or without
 * merged weights).
 */
type Kind = "full" | "adapter" | "merged";

/** A succeeded job of tenant A of `kind`, trained from `base`. */
async function finished(kind: Kind, base: string): Promise<string> {
  const lora = kind === "full" ? {} : { lora: { rank: 4, save_merged: kind === "merged" } };
  const job = await runningJob(fx, fx.keyA, { env: { id: "sokoban" }, model: { base, ...lora } });
  await succeedJob(fx.db, fenceOf(job));
  return job.id;
}

/**
 * Tenant A's succeeded jobs j[0] … j[n-1] of `kind`, each continued from the one before (j[0] from
 * builtin:tiny).
 */
async function finishedChain(kind: Kind, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    ids.push(await finished(kind, i === 0 ? "builtin:tiny" : `job:${ids[i - 1]}@0`));
  }
  return ids;
}

/** Submits a job continuing from `job:<jobId>`. */
function submitOn(jobId: string): Promise<Response> {
  return req(fx.app, "POST", "/v1/jobs", {
    key: fx.keyA,
    json: { env: { id: "sokoban" }, model: { base: `job:${jobId}` } },
  });
}

/** Submits on `job:<jobId>`, asserts 201 and cancels the new job. Returns its id. */
async function queuedOn(jobId: string): Promise<string> {
  const res = await submitOn(jobId);
  const job = await res.json();
  assert.equal(res.status, 201, JSON.stringify(job));
  return job.id;
}

async function cancel(jobId: string): Promise<void> {
  await (await req(fx.app, "POST", `/v1/jobs/${jobId}/cancel`, { key: fx.keyA })).body?.cancel();
}

async function del(jobId: string): Promise<Response> {
  return await req(fx.app, "DELETE", `/v1/jobs/${jobId}`, { key: fx.keyA });
}

Deno.test("a job continued from a full-weight checkpoint needs only that checkpoint: the job it was trained from may be deleted, before or while the continuation is queued", async () => {
  for (const kind of ["full", "merged"] as const) {
    const a = await finished("full", "builtin:tiny");
    const b = await finished(kind, `job:${a}@0`);
    // Queued on B, the continuation reads only B's checkpoint: A is not in use.
    const c = await queuedOn(b);
    const held = await del(b);
    assert.equal(held.status, 409, await held.text());
    const free = await del(a);
    assert.equal(free.status, 204, `${kind}: ${await free.text()}`);
    await cancel(c);
    // A gone, a new continuation from B is still queued.
    await cancel(await queuedOn(b));
    // B gone (its checkpoints with it), a continuation from B is refused naming B.
    assert.equal((await del(b)).status, 204);
    const refused = await submitOn(b);
    const problem = await refused.json();
    assert.equal(refused.status, 422, JSON.stringify(problem));
    assert.equal(problem.errors[0].path, "model.base");
    assert.equal(problem.errors[0].code, "unknown_job");
    assert.match(problem.detail, new RegExp(`job:${b}`));
  }
});

Deno.test("a job continued from an adapter-only LoRA checkpoint needs the base the adapter applies to: held while queued, refused once gone", async () => {
  const a = await finished("full", "builtin:tiny");
  const b = await finished("adapter", `job:${a}@0`);
  const c = await queuedOn(b);
  const held = await del(a);
  const conflict = await held.json();
  assert.equal(held.status, 409, JSON.stringify(conflict));
  assert.match(conflict.detail, new RegExp(`job ${c} uses it`));
  await cancel(c);
  assert.equal((await del(a)).status, 204);
  const refused = await submitOn(b);
  const problem = await refused.json();
  assert.equal(refused.status, 422, JSON.stringify(problem));
  assert.equal(
    problem.detail,
    `Cannot queue the job as each link of model.base's job: chain must be this tenant's: job:${a}, the base of job:${b}, is deleted or being deleted`,
  );
});

Deno.test("a chain of 8 adapter-only jobs is queued and holds its far end; one of 9 is a 422 at model.base, as the worker could not load it", async () => {
  assert.equal(MAX_ADAPTER_CHAIN, 8);
  const j = await finishedChain("adapter", 8);
  // j[8], a ninth adapter in a row, as a job queued without the API's chain check (none refused
  // it before adapter-only jobs on a chain of 8 were refused at submit, below).
  const { job } = await submitJob(fx.db, {
    tenantId: fx.tenantA.id,
    spec: parseJobSpec({
      env: { id: "sokoban" },
      model: { base: `job:${j[7]}@0`, lora: { rank: 4 } },
      priority: 1000,
    }),
  });
  await succeedJob(fx.db, fenceOf(await claimAs(fx.db, job.id)));
  j.push(job.id);
  // On j[7]: the adapters j[7] … j[0], then builtin:tiny. j[0] is read, so it is in use.
  const queued = await queuedOn(j[7]);
  const held = await del(j[0]);
  assert.equal(held.status, 409, await held.text());
  await cancel(queued);
  // On j[8]: nine adapters in a row.
  const refused = await submitOn(j[8]);
  const problem = await refused.json();
  assert.equal(refused.status, 422, JSON.stringify(problem));
  assert.deepEqual(problem.errors.map((e: { path: string; code: string }) => [e.path, e.code]), [
    ["model.base", "adapter_chain_too_long"],
  ]);
  assert.equal(
    problem.detail,
    `Cannot queue the job as model.base's chain of LoRA adapters must be at most 8 jobs long: job:${
      j[8]
    } and the jobs it continues from are more than 8 adapter-only jobs in a row; continue from a job whose checkpoints hold full weights (trained without model.lora, or with model.lora.save_merged)`,
  );
  // A full-weight job ends a chain: a long chain of full fine-tunes is queued on its last job.
  const full = await finishedChain("full", 10);
  await cancel(await queuedOn(full[9]));
});

Deno.test("an adapter-only LoRA job is queued while its checkpoints need at most 8 adapters; on 8 adapter-only jobs in a row it is a 422 at model.lora naming save_merged", async () => {
  // j[7] was queued on 7 adapter-only jobs: its own checkpoints load with exactly 8 adapters.
  const j = await finishedChain("adapter", 8);
  const onTop = (lora: Record<string, unknown>) =>
    req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: { env: { id: "sokoban" }, model: { base: `job:${j[7]}`, lora } },
    });
  // Adapter-only on j[7]: its checkpoints would need 9 adapters, which neither the worker nor
  // the inference server loads, so nothing could serve or continue from it.
  const refused = await onTop({ rank: 4 });
  const problem = await refused.json();
  assert.equal(refused.status, 422, JSON.stringify(problem));
  assert.deepEqual(problem.errors.map((e: { path: string; code: string }) => [e.path, e.code]), [
    ["model.lora", "adapter_chain_too_long"],
  ]);
  assert.equal(
    problem.detail,
    `Cannot queue the job as the chain of LoRA adapters loading its checkpoints reads must be at most 8 jobs long: job:${
      j[7]
    } and the jobs it continues from are already 8 adapter-only jobs in a row, and this job's model.lora without save_merged would be adapter 9; set model.lora.save_merged: true (its checkpoints then hold full weights and load alone), or continue from a job whose checkpoints hold full weights (trained without model.lora, or with model.lora.save_merged)`,
  );
  // With merged weights its checkpoints load alone: queued.
  const merged = await onTop({ rank: 4, save_merged: true });
  const body = await merged.json();
  assert.equal(merged.status, 201, JSON.stringify(body));
  await cancel(body.id);
});

Deno.test({
  name: "stop the chain-cap fixture",
  async fn() {
    await fx.close();
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
