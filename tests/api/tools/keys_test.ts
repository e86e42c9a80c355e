import assert from "node:assert/strict";
import { resolveKey } from "../../../jobs/api_keys.ts";
import { keysMain } from "../../../api/tools/keys.ts";
import { startApiFixture } from "../_fixture.ts";

const fx = await startApiFixture();

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
