/**
 * The embedded database's loopback server refuses clients that do not know the data folder's
 * password: before, any user of the machine could connect to it and read every tenant's rows.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { openDatabase, tenants } from "../../../jobs/mod.ts";

async function tryQuery(url: string): Promise<string> {
  const sql = postgres(url, { prepare: false, max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    const [row] = await sql`select count(*)::int as n from tenants`;
    return `rows: ${row.n}`;
  } catch (e) {
    return `refused: ${(e as Error).message}`;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

Deno.test("the embedded database's server refuses a client without the folder's password", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-pg-auth-" });
  const db = await openDatabase({ dataDir, url: "" });
  try {
    await db.orm.insert(tenants).values({ name: "secret-tenant" });
    const { port } = JSON.parse(await Deno.readTextFile(`${dataDir}/pg.lock`));
    assert.match(await tryQuery(`postgres://postgres@127.0.0.1:${port}/postgres`), /^refused/);
    assert.match(
      await tryQuery(`postgres://postgres:wrong@127.0.0.1:${port}/postgres`),
      /^refused: password authentication failed/,
    );
    const password = (await Deno.readTextFile(`${dataDir}/pg.secret`)).trim();
    assert.equal((await Deno.stat(`${dataDir}/pg.secret`)).mode! & 0o777, 0o600);
    assert.equal(
      await tryQuery(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`),
      "rows: 1",
    );
  } finally {
    await db.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
