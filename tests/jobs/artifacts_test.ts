import assert from "node:assert/strict";
import {
  getSkillLibrary,
  latestCheckpoint,
  listCheckpoints,
  readCheckpointFile,
  readSkillLibrary,
  saveCheckpoint,
  saveSkillLibrary,
} from "../../jobs/artifacts.ts";
import { FenceLostError } from "../../jobs/errors.ts";
import { claimJob, fenceOf, reapExpiredLeases, submitJob } from "../../jobs/queue.ts";
import { createTenant, openTestDatabase, testSpec } from "../_harness/fixtures.ts";
import { startTestStore } from "../_harness/s3.ts";

const text = (s: string) => new TextEncoder().encode(s);

Deno.test("checkpoints and skill libraries", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  const store = s3.store;
  try {
    const tenantId = await createTenant(db);
    await submitJob(db, { tenantId, spec: testSpec() });
    const job = (await claimJob(db, { workerId: "w1", device: "cpu", leaseMs: 500 }))!;
    const writer = { fence: fenceOf(job), tenantId };

    await t.step("a checkpoint's objects are uploaded and its row commits them", async () => {
      assert.equal(await latestCheckpoint(db, job.id), null);
      await saveCheckpoint(db, store, writer, {
        step: 1,
        files: [{ name: "config.json", bytes: text('{"a":1}') }],
      });
      const saved = await saveCheckpoint(db, store, writer, {
        step: 2,
        files: [
          { name: "config.json", bytes: text('{"a":2}') },
          { name: "trainer_state.json", bytes: text('{"step":2}') },
        ],
      });
      assert.equal(
        saved.prefix,
        `tenants/${tenantId}/jobs/${job.id}/checkpoints/step-2/attempt-0/`,
      );
      assert.equal(saved.bytes, 7 + 10);
      const latest = (await latestCheckpoint(db, job.id))!;
      assert.equal(latest.step, 2);
      const state = await readCheckpointFile(store, latest, "trainer_state.json");
      assert.equal(new TextDecoder().decode(state), '{"step":2}');
      await assert.rejects(readCheckpointFile(store, latest, "nope.bin"), RangeError);
    });

    await t.step("a skill library is stored with its hash and count", async () => {
      await saveSkillLibrary(db, store, writer, {
        step: 2,
        json: { skills: [{ text: "push boxes along walls last" }] },
        skillCount: 1,
      });
      const lib = (await getSkillLibrary(db, job.id))!;
      assert.equal(lib.skillCount, 1);
      assert.match(lib.key, /skills\/step-2\/attempt-0\.json$/);
      assert.deepEqual(await readSkillLibrary(store, lib), {
        skills: [{ text: "push boxes along walls last" }],
      });
    });

    await t.step("a stale worker's checkpoint and skills never become visible", async () => {
      await reapExpiredLeases(db, { now: new Date(Date.now() + 60_000) });
      await assert.rejects(
        saveCheckpoint(db, store, writer, {
          step: 3,
          files: [{ name: "config.json", bytes: text("{}") }],
        }),
        FenceLostError,
      );
      await assert.rejects(
        saveSkillLibrary(db, store, writer, { step: 3, json: {}, skillCount: 0 }),
        FenceLostError,
      );
      assert.deepEqual((await listCheckpoints(db, job.id)).map((c) => c.step), [1, 2]);
      assert.equal((await getSkillLibrary(db, job.id))!.step, 2);
    });

    await t.step(
      "a stale worker's late upload leaves the next attempt's committed objects intact",
      async () => {
        // `job` was reaped above (attempt 0 → 1); the next attempt claims it and commits step 2.
        const next = (await claimJob(db, { workerId: "w2", device: "cpu", leaseMs: 60_000 }))!;
        assert.equal(next.id, job.id);
        assert.equal(next.attempt, 1);
        const nextWriter = { fence: fenceOf(next), tenantId };
        await saveCheckpoint(db, store, nextWriter, {
          step: 2,
          files: [{ name: "config.json", bytes: text('{"by":"w2"}') }],
        });
        await saveSkillLibrary(db, store, nextWriter, { step: 2, json: ["w2"], skillCount: 1 });
        // The stale worker (attempt 0) was still uploading the same step: its rows are refused,
        // and its objects must not replace the committed ones.
        await assert.rejects(
          saveCheckpoint(db, store, writer, {
            step: 2,
            files: [{ name: "config.json", bytes: text('{"by":"w1, late"}') }],
          }),
          FenceLostError,
        );
        await assert.rejects(
          saveSkillLibrary(db, store, writer, { step: 2, json: ["w1"], skillCount: 1 }),
          FenceLostError,
        );
        const ckpt = (await latestCheckpoint(db, job.id))!;
        const config = await readCheckpointFile(store, ckpt, "config.json");
        assert.equal(new TextDecoder().decode(config), '{"by":"w2"}');
        assert.deepEqual(await readSkillLibrary(store, (await getSkillLibrary(db, job.id))!), [
          "w2",
        ]);
      },
    );
  } finally {
    await s3.close();
    await close();
  }
});
