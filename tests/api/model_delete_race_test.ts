/**
 * A delete of an uploaded model racing a submit that trains from it (`model.base: model:<id>`),
 * or that continues a job trained from it (a `job:` chain ending at the model), against the real
 * Postgres: the submit locks the model's row FOR SHARE in its insert's transaction and the delete
 * locks it FOR UPDATE, checks its users and deletes in one, so either the delete finds the new job
 * among the model's users (409) or the submit finds the model gone (422 at `model.base`) — never a
 * queued job whose chain ends at a deleted model.
 */
import assert from "node:assert/strict";
import { commitModel, fenceOf, succeedJob } from "../../jobs/mod.ts";
import { deleteInSubmitWindow, sentTogether, submitLocksFirst } from "./_delete_race.ts";
import { req, runningJob, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

/**
 * A model row of tenant A (what `POST /v1/models` commits once its files checked out). Its files
 * list is empty: the submit and the delete read only the row.
 */
async function uploadedModel(): Promise<string> {
  const id = crypto.randomUUID();
  const committed = await commitModel(fx.db, {
    id,
    tenantId: fx.tenantA.id,
    name: null,
    architecture: "Qwen3ForCausalLM",
    config: { architectures: ["Qwen3ForCausalLM"], model_type: "qwen3" },
    parameterCount: 1,
    files: [],
    requestSha256: "0".repeat(64),
  });
  assert.equal(committed.conflict, undefined);
  return id;
}

/**
 * Ids of tenant A's jobs that name `model:<modelId>` as their base, and whether the row is left.
 */
async function namedBy(modelId: string) {
  const users = await fx.db.query<{ id: string }>(
    `select id from jobs where tenant_id = $1::uuid and spec->'model'->>'base' = $2::text`,
    [fx.tenantA.id, `model:${modelId}`],
  );
  const rows = await fx.db.query(`select 1 from models where id = $1::uuid`, [modelId]);
  return { users: users.map((u) => String(u.id)), modelLive: rows.length === 1 };
}

/**
 * The model's row held by a third transaction, and the statements that wait for it: the submit's
 * FOR SHARE of `models where id`, the delete's FOR UPDATE of `models where tenant_id`.
 */
function modelRowHeld(modelId: string) {
  return {
    held: { table: "models", id: modelId },
    heldName: "the model's row",
    submitWaitsOn: "from models where id",
    deleteWaitsOn: "from models where tenant_id",
  } as const;
}

/** The submit body of a job training from the model. */
function onModel(modelId: string) {
  return { env: { id: "sokoban" }, model: { base: `model:${modelId}` } };
}

Deno.test("a model delete that lands between a submit's checks and its insert leaves the submit a 422 at model.base and no job naming the deleted model", async () => {
  const modelId = await uploadedModel();
  // The submit route's last check before the insert: the delete runs there, in the window.
  await deleteInSubmitWindow(fx, {
    submit: onModel(modelId),
    deletePath: `/v1/models/${modelId}`,
    deleteFinds: "the delete found no user yet",
    refused: {
      code: "unknown_model",
      detail:
        `Cannot queue the job as model.base must name a model of this tenant: model:${modelId} is deleted`,
    },
  });
  assert.deepEqual(await namedBy(modelId), { users: [], modelLive: false });
});

Deno.test("a submit that takes the model's lock first makes a concurrent delete wait and then refuse with 409 naming the new job", async () => {
  const modelId = await uploadedModel();
  // A third transaction holds the model's row, so both requests queue behind it in a known
  // order: the submit first, then the delete.
  const jobId = await submitLocksFirst(fx, {
    submit: onModel(modelId),
    deletePath: `/v1/models/${modelId}`,
    ...modelRowHeld(modelId),
  });
  assert.deepEqual(await namedBy(modelId), { users: [jobId], modelLive: true });
  await req(fx.app, "POST", `/v1/jobs/${jobId}/cancel`, { key: fx.keyA });
});

Deno.test("model deletes and submits sent together never leave a job naming a deleted model", async () => {
  const models: string[] = [];
  for (let i = 0; i < 6; i++) models.push(await uploadedModel());
  const outcomes = await Promise.all(models.map(async (modelId) => {
    const [submitted, deleted] = await sentTogether(fx, {
      submit: onModel(modelId),
      deletePath: `/v1/models/${modelId}`,
    });
    await submitted.body?.cancel();
    await deleted.body?.cancel();
    return { modelId, submit: submitted.status, del: deleted.status, ...await namedBy(modelId) };
  }));
  for (const o of outcomes) {
    // Either the job was queued and the delete refused, or the model went and the submit was
    // refused (422 from the submit's own lock, or from its earlier check when the delete was done).
    if (o.submit === 201) {
      assert.deepEqual([o.del, o.users.length, o.modelLive], [409, 1, true], JSON.stringify(o));
      await req(fx.app, "POST", `/v1/jobs/${o.users[0]}/cancel`, { key: fx.keyA });
    } else {
      assert.deepEqual([o.submit, o.del, o.users, o.modelLive], [422, 204, [], false]);
    }
  }
});

/**
 * A succeeded LoRA job of tenant A trained on `base` without merged weights: what a new job may
 * continue from, loading `base` too (the adapter applies to it).
 */
async function finishedOn(base: string): Promise<string> {
  const model = { base, lora: { rank: 4 } };
  const job = await runningJob(fx, fx.keyA, { env: { id: "sokoban" }, model });
  await succeedJob(fx.db, fenceOf(job));
  return job.id;
}

/** Ids of tenant A's jobs that name `job:<jobId>` as their base. */
async function continuing(jobId: string): Promise<string[]> {
  const users = await fx.db.query<{ id: string }>(
    `select id from jobs where tenant_id = $1::uuid and spec->'model'->>'base' = $2::text`,
    [fx.tenantA.id, `job:${jobId}`],
  );
  return users.map((u) => String(u.id));
}

/** The submit body of a job continuing from `jobId`. */
function onJob(jobId: string) {
  return { env: { id: "sokoban" }, model: { base: `job:${jobId}` } };
}

Deno.test("a model delete that lands between the checks and the insert of a submit on a job chain ending at the model leaves the submit a 422 naming the model", async () => {
  const modelId = await uploadedModel();
  // model:M ← job first ← job second: a submit on job:second uses the model two links up.
  const first = await finishedOn(`model:${modelId}`);
  const second = await finishedOn(`job:${first}`);
  await deleteInSubmitWindow(fx, {
    submit: onJob(second),
    deletePath: `/v1/models/${modelId}`,
    deleteFinds: "the delete found no user yet (the chain's jobs are final)",
    refused: {
      code: "unknown_model",
      detail:
        `Cannot queue the job as each link of model.base's job: chain must be this tenant's: model:${modelId}, the base of job:${first}, is deleted`,
    },
  });
  assert.deepEqual(await continuing(second), []);
  assert.deepEqual(await namedBy(modelId), { users: [first], modelLive: false });
});

Deno.test("a submit on a job chain ending at the model that locks the model first makes a concurrent delete wait and then refuse with 409 naming the new job", async () => {
  const modelId = await uploadedModel();
  const first = await finishedOn(`model:${modelId}`);
  const jobId = await submitLocksFirst(fx, {
    submit: onJob(first),
    deletePath: `/v1/models/${modelId}`,
    ...modelRowHeld(modelId),
  });
  assert.deepEqual(await continuing(first), [jobId]);
  assert.deepEqual(await namedBy(modelId), { users: [first], modelLive: true });
  await req(fx.app, "POST", `/v1/jobs/${jobId}/cancel`, { key: fx.keyA });
});

Deno.test("model deletes and submits on job chains ending at them sent together never leave a queued job whose chain ends at a deleted model", async () => {
  const chains: { modelId: string; first: string }[] = [];
  for (let i = 0; i < 6; i++) {
    const modelId = await uploadedModel();
    chains.push({ modelId, first: await finishedOn(`model:${modelId}`) }); // one claim at a time
  }
  const outcomes = await Promise.all(chains.map(async ({ modelId, first }) => {
    const [submitted, deleted] = await sentTogether(fx, {
      submit: onJob(first),
      deletePath: `/v1/models/${modelId}`,
    });
    await deleted.body?.cancel();
    const body = await submitted.json();
    return {
      modelId,
      submit: submitted.status,
      code: body.errors?.[0]?.code,
      del: deleted.status,
      users: await continuing(first),
      modelLive: (await namedBy(modelId)).modelLive,
    };
  }));
  for (const o of outcomes) {
    if (o.submit === 201) {
      assert.deepEqual([o.del, o.users.length, o.modelLive], [409, 1, true], JSON.stringify(o));
      await req(fx.app, "POST", `/v1/jobs/${o.users[0]}/cancel`, { key: fx.keyA });
    } else {
      assert.deepEqual([o.submit, o.code, o.del, o.users, o.modelLive], [
        422,
        "unknown_model",
        204,
        [],
        false,
      ]);
    }
  }
});

Deno.test({
  name: "stop the model delete-race fixture",
  async fn() {
    await fx.close();
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
