import assert from "node:assert/strict";
import { createKey, hashKey, listKeys, resolveKey, revokeKey } from "../../api/api_keys.ts";
import { keysMain } from "../../api/keys.ts";
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

Deno.test("the keys command creates a key once, lists it and revokes it", async () => {
  const lines: string[] = [];
  const log = console.log;
  const error = console.error;
  console.log = (s: string) => lines.push(s);
  console.error = () => {};
  Deno.env.set("DATABASE_URL", fx.url);
  try {
    assert.equal(await keysMain(["create", "--tenant", "cli-tenant"]), 0);
    const key = lines.pop()!;
    assert.equal((await resolveKey(fx.db, key))?.name, "cli-tenant");
    assert.equal(await keysMain(["list", "--tenant", "cli-tenant"]), 0);
    assert.ok(lines.some((l) => l.includes(key.slice(0, 12))));
    assert.doesNotMatch(lines.join("\n"), new RegExp(key));
    assert.equal(await keysMain(["revoke", key.slice(0, 12)]), 0);
    assert.equal(await resolveKey(fx.db, key), undefined);
    assert.equal(await keysMain(["create"]), 2);
  } finally {
    console.log = log;
    console.error = error;
    Deno.env.delete("DATABASE_URL");
  }
});

Deno.test({
  name: "close the keys fixture",
  fn: () => fx.close(),
  sanitizeOps: false,
  sanitizeResources: false,
});
