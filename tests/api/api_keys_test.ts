import assert from "node:assert/strict";
import { createKey, hashKey, listKeys, resolveKey, revokeKey } from "../../jobs/api_keys.ts";
import { req, startApiFixture } from "./_fixture.ts";

const fx = await startApiFixture();

Deno.test("keys are stored only as their sha256 and resolve to their tenant", async () => {
  const { key, info } = await createKey(fx.db, "acme", { name: "ci" });
  assert.match(key, /^seed_[A-Za-z0-9_-]{43}$/);
  assert.equal(info.prefix, key.slice(0, 12));
  const rows = await fx.db.query<{ hash: string }>("select hash from api_keys where id = $1", [
    info.id,
  ]);
  assert.equal(rows[0].hash, hashKey(key));
  assert.doesNotMatch(JSON.stringify(rows), new RegExp(key));
  assert.equal((await resolveKey(fx.db, key))?.name, "acme");
  const second = await createKey(fx.db, "acme");
  assert.deepEqual((await listKeys(fx.db, "acme")).map((k) => k.id), [info.id, second.info.id]);
});

Deno.test("a revoked key is refused with 401", async () => {
  const { key, info } = await createKey(fx.db, "revokers");
  const ok = await req(fx.app, "GET", "/v1/jobs", { key });
  assert.equal(ok.status, 200);
  const revoked = await revokeKey(fx.db, info.prefix);
  assert.ok(revoked.revoked_at);
  const res = await req(fx.app, "GET", "/v1/jobs", { key });
  assert.equal(res.status, 401);
  assert.match((await res.json()).detail, /unknown or revoked/);
  await assert.rejects(() => revokeKey(fx.db, "seed_nothing"), /none matched/);
});

Deno.test({
  name: "close the keys fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
