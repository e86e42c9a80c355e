/**
 * The two orders in which a `DELETE` of a job or model can meet a `POST /v1/jobs` whose
 * `model.base` chain uses it, run against the fixture's real Postgres as tenant A
 * (tests/api/job_delete_race_test.ts, tests/api/model_delete_race_test.ts). Each function runs
 * its race and checks the answers every such race must give; the caller checks the rows left.
 */
import assert from "node:assert/strict";
import { createApp } from "../../api/app.ts";
import { type ApiFixture, req, until, waitingOn } from "./_fixture.ts";

/** A race: the submit, and the delete of something its base chain uses. */
export interface DeleteRace {
  /** The `POST /v1/jobs` body. */
  submit: { env: { id: string }; model: { base: string } };
  /** The delete's path, e.g. `/v1/models/<id>`. */
  deletePath: string;
}

/** A race ordered by a row lock: see {@link submitLocksFirst}. */
export interface LockedRace extends DeleteRace {
  /** The row a third transaction holds FOR UPDATE while both requests start. */
  held: { table: "jobs" | "models"; id: string };
  /** How the messages name the held row, e.g. "the model's row". */
  heldName: string;
  /** Text of the submit's statement that waits for the held row (`pg_stat_activity.query`). */
  submitWaitsOn: string;
  /** Text of the delete's statement that waits for the held row. */
  deleteWaitsOn: string;
}

/**
 * The submit takes the lock first: while a third transaction holds `held`, the submit starts and
 * is seen waiting on it, then the delete starts and is seen waiting too; the transaction ends, so
 * the submit goes first. Checks the submit is queued (201) and the delete refused (409) naming
 * the new job as a user of its `model.base` chain.
 * @returns the new job's id (the caller cancels it).
 * @throws AssertionError when the submit ends before the row is released or an answer differs.
 */
export async function submitLocksFirst(fx: ApiFixture, race: LockedRace): Promise<string> {
  let submit: Promise<Response> | undefined;
  let del: Promise<Response> | undefined;
  await fx.db.transaction(async (tx) => {
    // The table is one of two literals (LockedRace.held), never outside input.
    await tx.query(`select 1 from ${race.held.table} where id = $1::uuid for update`, [
      race.held.id,
    ]);
    submit = Promise.resolve(req(fx.app, "POST", "/v1/jobs", {
      key: fx.keyA,
      json: race.submit,
    }));
    let submitEnded = false;
    submit.finally(() => submitEnded = true);
    await until(`the submit waiting for ${race.heldName}`, async () => {
      assert.equal(submitEnded, false, `the submit must wait for ${race.heldName} lock`);
      return await waitingOn(fx.db, race.submitWaitsOn) === 1;
    });
    del = Promise.resolve(req(fx.app, "DELETE", race.deletePath, { key: fx.keyA }));
    await until(
      `the delete waiting for ${race.heldName}`,
      async () => await waitingOn(fx.db, race.deleteWaitsOn) === 1,
    );
  });
  const submitted = await submit!;
  const job = await submitted.json();
  assert.equal(submitted.status, 201, JSON.stringify(job));
  const refused = await del!;
  const problem = await refused.json();
  assert.equal(refused.status, 409, JSON.stringify(problem));
  assert.match(problem.detail, new RegExp(`job ${job.id} uses it as model\\.base`));
  return job.id;
}

/** A race whose delete lands in the submit's window: see {@link deleteInSubmitWindow}. */
export interface WindowRace extends DeleteRace {
  /** Why the delete is expected to succeed (the message of its 204 check). */
  deleteFinds: string;
  /** The submit's 422: the code of its one error (at `model.base`) and its detail. */
  refused: { code: string; detail: string };
}

/**
 * The delete lands between the submit's checks and its insert: an app whose last check before
 * the insert (`checkSpec`) runs the delete, for this race's submit only. Checks the delete
 * succeeded (204) and the submit was refused with 422 at `model.base` with `refused`'s code and
 * detail.
 * @throws AssertionError when an answer differs.
 */
export async function deleteInSubmitWindow(fx: ApiFixture, race: WindowRace): Promise<void> {
  let deleted: number | undefined;
  const app = createApp({
    db: fx.db,
    store: fx.store,
    authCacheMs: 0,
    checkSpec: async (spec) => {
      if (spec.model.base !== race.submit.model.base) return;
      deleted = (await req(fx.app, "DELETE", race.deletePath, { key: fx.keyA })).status;
    },
  });
  const res = await req(app, "POST", "/v1/jobs", { key: fx.keyA, json: race.submit });
  assert.equal(deleted, 204, race.deleteFinds);
  const body = await res.json();
  assert.equal(res.status, 422, JSON.stringify(body));
  assert.deepEqual(body.errors.map((e: { path: string; code: string }) => [e.path, e.code]), [
    ["model.base", race.refused.code],
  ]);
  assert.equal(body.detail, race.refused.detail);
}

/**
 * The submit and the delete sent together, with nothing ordering them.
 * @returns both responses, bodies unread.
 */
export async function sentTogether(
  fx: ApiFixture,
  race: DeleteRace,
): Promise<[submitted: Response, deleted: Response]> {
  return await Promise.all([
    req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: race.submit }),
    req(fx.app, "DELETE", race.deletePath, { key: fx.keyA }),
  ]);
}
