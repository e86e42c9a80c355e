import assert from "node:assert/strict";
import postgres from "postgres";

Deno.test("the harness gives the suite a reachable throwaway Postgres", async () => {
  const url = Deno.env.get("TEST_DATABASE_URL");
  assert.ok(url, "TEST_DATABASE_URL is set by tests/run.ts");
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select 1 + 1 as two`;
    assert.equal(row.two, 2);
  } finally {
    await sql.end();
  }
});
