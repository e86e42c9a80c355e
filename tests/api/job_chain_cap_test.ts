/**
 * The far end of a submit's base chain against the real Postgres: the links a submit locks and
 * refuses when gone are the links a delete's user search follows from the queued job (jobs/_rows.ts
 * `baseChain`: the base and the 16 bases after it), so a job at the cap is held by both and one
 * beyond it by neither.
 */
import assert from "node:assert/strict";
import { fenceOf, succeedJob } from "../../jobs/mod.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

/** Tenant A's succeeded jobs j[0] … j[n-1], each continued from the one before (j[0] from builtin:tiny). */
async function finishedChain(n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const spec = i === 0
      ? { env: { id: "sokoban" } }
      : { env: { id: "sokoban" }, model: { base: `job:${ids[i - 1]}@0` } };
    const job = await runningJob(fx, fx.keyA, spec);
    await succeedJob(fx.db, fenceOf(job));
    ids.push(job.id);
  }
  return ids;
}

Deno.test("a job 17 links up a submit's chain is held by the queued job and refused when gone; one 18 links up by neither", async () => {
  const j = await finishedChain(18);
  const submit = () =>
    req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: { env: { id: "sokoban" }, model: { base: `job:${j[17]}@0` } },
    });
  // Queued on j[17]: its chain is j[17] … j[1] (the base and 16 more), so j[1] is in use.
  const queued = await submit();
  const job = await queued.json();
  assert.equal(queued.status, 201, JSON.stringify(job));
  const held = await req(fx.app, "DELETE", `/v1/jobs/${j[1]}`, { key: fx.keyA });
  assert.equal(held.status, 409, await held.text());
  const beyond = await req(fx.app, "DELETE", `/v1/jobs/${j[0]}`, { key: fx.keyA });
  assert.equal(beyond.status, 204, await beyond.text());
  await (await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA })).body?.cancel();

  // j[0] gone changes nothing for a new submit; j[1] gone refuses it, naming j[1] and j[2].
  const again = await submit();
  const second = await again.json();
  assert.equal(again.status, 201, JSON.stringify(second));
  await (await req(fx.app, "POST", `/v1/jobs/${second.id}/cancel`, { key: fx.keyA })).body
    ?.cancel();
  const gone = await req(fx.app, "DELETE", `/v1/jobs/${j[1]}`, { key: fx.keyA });
  assert.equal(gone.status, 204, await gone.text());
  const refused = await submit();
  const problem = await refused.json();
  assert.equal(refused.status, 422, JSON.stringify(problem));
  assert.equal(
    problem.detail,
    `Cannot queue the job as each link of model.base's job: chain must be this tenant's: job:${
      j[1]
    }, the base of job:${j[2]}, is deleted or being deleted`,
  );
});

Deno.test({
  name: "stop the chain-cap fixture",
  async fn() {
    await fx.close();
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
