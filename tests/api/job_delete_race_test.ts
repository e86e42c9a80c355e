/**
 * A delete of a job racing a submit that continues from it (`model.base: job:<id>`), or from a job
 * whose adapter-only LoRA checkpoints apply to it (a `job:` chain), against the real Postgres: the
 * submit locks every job of its base's chain it reads in its insert's transaction, so either the
 * delete finds the new job among the job's users (409) or the submit finds the job gone (422 at
 * `model.base` naming it) — never a queued job whose chain holds a deleted job.
 */
import assert from "node:assert/strict";
import { fenceOf, succeedJob } from "../../jobs/mod.ts";
import { deleteInSubmitWindow, sentTogether, submitLocksFirst } from "./_delete_race.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

/**
 * A succeeded job of tenant A (trained from `base`, `builtin:tiny` when left out; a LoRA job
 * without merged weights with `adapter`, whose checkpoints need `base` to load): what a new job
 * may continue from, and what may be deleted.
 */
async function finishedBase(base?: string, adapter = false): Promise<string> {
  const lora = adapter ? { lora: { rank: 4 } } : {};
  const spec = base === undefined
    ? undefined
    : { env: { id: "sokoban" }, model: { base, ...lora } };
  const job = await runningJob(fx, fx.keyA, spec);
  await succeedJob(fx.db, fenceOf(job));
  return job.id;
}

/**
 * A two-link chain of tenant A's succeeded jobs: `root`, and `middle`, a LoRA adapter trained on
 * it (`model.base: job:<root>`, no merged weights). A submit on `job:<middle>` uses both.
 */
async function finishedChain(): Promise<{ root: string; middle: string }> {
  const root = await finishedBase();
  return { root, middle: await finishedBase(`job:${root}`, true) };
}

/** The submit body of a job continuing from `jobId`. */
function continuing(jobId: string) {
  return { env: { id: "sokoban" }, model: { base: `job:${jobId}` } };
}

/** Ids of tenant A's jobs that name `job:<baseId>` as their base, and the base row's state. */
async function namedBy(baseId: string) {
  const users = await fx.db.query<{ id: string }>(
    `select id from jobs where tenant_id = $1::uuid and spec->'model'->>'base' = $2::text`,
    [fx.tenantA.id, `job:${baseId}`],
  );
  const [base] = await fx.db.query<{ deleting_at: Date | null }>(
    `select deleting_at from jobs where id = $1::uuid`,
    [baseId],
  );
  return { users: users.map((u) => String(u.id)), baseLive: base?.deleting_at === null };
}

Deno.test("a delete that lands between a submit's checks and its insert leaves the submit a 422 at model.base and no job naming the deleted base", async () => {
  const baseId = await finishedBase();
  // The submit route's last check before the insert: the delete runs there, in the window.
  await deleteInSubmitWindow(fx, {
    submit: continuing(baseId),
    deletePath: `/v1/jobs/${baseId}`,
    deleteFinds: "the delete found no user yet",
    refused: {
      code: "unknown_job",
      detail:
        `Cannot queue the job as model.base must name a job of this tenant: job:${baseId} is deleted or being deleted`,
    },
  });
  assert.deepEqual(await namedBy(baseId), { users: [], baseLive: false });
});

Deno.test("a submit that takes the base job's lock first makes a concurrent delete wait and then refuse with 409 naming the new job", async () => {
  const baseId = await finishedBase();
  // A third transaction holds the base row, so both requests queue behind it in a known order:
  // the submit first, then the delete.
  const jobId = await submitLocksFirst(fx, {
    submit: continuing(baseId),
    deletePath: `/v1/jobs/${baseId}`,
    held: { table: "jobs", id: baseId },
    heldName: "the base job's row",
    submitWaitsOn: "for share",
    deleteWaitsOn: "for update",
  });
  assert.deepEqual(await namedBy(baseId), { users: [jobId], baseLive: true });
  await req(fx.app, "POST", `/v1/jobs/${jobId}/cancel`, { key: fx.keyA });
});

Deno.test("deletes and submits sent together never leave a job naming a deleted base", async () => {
  const bases: string[] = [];
  for (let i = 0; i < 6; i++) bases.push(await finishedBase()); // one claim at a time
  const outcomes = await Promise.all(bases.map(async (baseId) => {
    const [submitted, deleted] = await sentTogether(fx, {
      submit: continuing(baseId),
      deletePath: `/v1/jobs/${baseId}`,
    });
    await submitted.body?.cancel();
    await deleted.body?.cancel();
    return { baseId, submit: submitted.status, del: deleted.status, ...await namedBy(baseId) };
  }));
  for (const o of outcomes) {
    // Either the job was queued and the delete refused, or the base went and the submit was
    // refused.
    if (o.submit === 201) {
      assert.deepEqual([o.del, o.users.length, o.baseLive], [409, 1, true], JSON.stringify(o));
      await req(fx.app, "POST", `/v1/jobs/${o.users[0]}/cancel`, { key: fx.keyA });
    } else {
      assert.deepEqual([o.submit, o.del, o.users, o.baseLive], [422, 204, [], false]);
    }
  }
});

Deno.test("a delete of a job two links up a submit's chain that lands between its checks and its insert leaves the submit a 422 naming that job", async () => {
  const { root, middle } = await finishedChain();
  await deleteInSubmitWindow(fx, {
    submit: continuing(middle),
    deletePath: `/v1/jobs/${root}`,
    deleteFinds: "the delete found no user yet (the middle job is final)",
    refused: {
      code: "unknown_job",
      detail:
        `Cannot queue the job as each link of model.base's job: chain must be this tenant's: job:${root}, the base of job:${middle}, is deleted or being deleted`,
    },
  });
  assert.deepEqual(await namedBy(middle), { users: [], baseLive: true });
  assert.deepEqual(await namedBy(root), { users: [middle], baseLive: false });
});

Deno.test("a submit that locks its chain first makes a delete of the job two links up wait and then refuse with 409 naming the new job", async () => {
  const { root, middle } = await finishedChain();
  // A third transaction holds the root's row, so both requests queue behind it in a known order:
  // the submit (holding the middle job's row) first, then the delete.
  const jobId = await submitLocksFirst(fx, {
    submit: continuing(middle),
    deletePath: `/v1/jobs/${root}`,
    held: { table: "jobs", id: root },
    heldName: "the root job's row",
    submitWaitsOn: "for share",
    deleteWaitsOn: "for update",
  });
  assert.deepEqual(await namedBy(middle), { users: [jobId], baseLive: true });
  assert.deepEqual(await namedBy(root), { users: [middle], baseLive: true });
  await req(fx.app, "POST", `/v1/jobs/${jobId}/cancel`, { key: fx.keyA });
});

Deno.test("deletes of a chain's root and submits on its middle job sent together never leave a queued job whose chain holds a deleted job", async () => {
  const chains: { root: string; middle: string }[] = [];
  for (let i = 0; i < 6; i++) chains.push(await finishedChain()); // one claim at a time
  const outcomes = await Promise.all(chains.map(async ({ root, middle }) => {
    const [submitted, deleted] = await sentTogether(fx, {
      submit: continuing(middle),
      deletePath: `/v1/jobs/${root}`,
    });
    await deleted.body?.cancel();
    const body = await submitted.json();
    return {
      root,
      submit: submitted.status,
      code: body.errors?.[0]?.code,
      del: deleted.status,
      users: (await namedBy(middle)).users,
      rootLive: (await namedBy(root)).baseLive,
    };
  }));
  for (const o of outcomes) {
    // Either the job was queued and the delete refused, or the root went and the submit was
    // refused naming it.
    if (o.submit === 201) {
      assert.deepEqual([o.del, o.users.length, o.rootLive], [409, 1, true], JSON.stringify(o));
      await req(fx.app, "POST", `/v1/jobs/${o.users[0]}/cancel`, { key: fx.keyA });
    } else {
      assert.deepEqual([o.submit, o.code, o.del, o.users, o.rootLive], [
        422,
        "unknown_job",
        204,
        [],
        false,
      ]);
    }
  }
});

Deno.test({
  name: "stop the delete-race fixture",
  async fn() {
    await fx.close();
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
