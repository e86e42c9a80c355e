/**
 * Migrations applied to a database that already holds jobs: the database is first migrated with
 * the migrations before the one under test only (a copy of `migrations/` whose journal ends
 * there), given a job as that release wrote it, then opened as the service opens it
 * (`openDatabase`, which applies the rest).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { getJob, MIGRATIONS_DIR, openDatabase, submitJob } from "../../jobs/mod.ts";
import { createTestDatabase } from "../_harness/database.ts";
import { testSpec } from "../_harness/fixtures.ts";

interface Journal {
  entries: { idx: number; tag: string }[];
}

/**
 * A copy of `migrations/` whose journal ends before the migration `tag`.
 * @throws AssertionError when `tag` is not in the journal.
 */
async function migrationsBefore(tag: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "migrations-before-" });
  for await (const entry of Deno.readDir(MIGRATIONS_DIR)) {
    if (entry.isFile) await Deno.copyFile(join(MIGRATIONS_DIR, entry.name), join(dir, entry.name));
  }
  await Deno.mkdir(join(dir, "meta"));
  const journal: Journal = JSON.parse(
    await Deno.readTextFile(join(MIGRATIONS_DIR, "meta", "_journal.json")),
  );
  const at = journal.entries.findIndex((e) => e.tag === tag);
  assert.ok(at > 0, `migration ${tag} is in migrations/meta/_journal.json`);
  journal.entries = journal.entries.slice(0, at);
  await Deno.writeTextFile(join(dir, "meta", "_journal.json"), JSON.stringify(journal));
  return dir;
}

Deno.test("0008_submitted_spec applies on a database with jobs: theirs stay as they were, with submitted_spec null", async () => {
  const t = await createTestDatabase();
  const before = await migrationsBefore("0008_submitted_spec");
  const spec = testSpec({ steps: 3 });
  let jobId = "";
  let tenantId = "";
  const sql = postgres(t.url, { max: 1, onnotice: () => {} });
  try {
    await migrate(drizzle({ client: sql }), { migrationsFolder: before });
    [{ id: tenantId }] = await sql`insert into tenants (name) values ('old') returning id`;
    [{ id: jobId }] = await sql`insert into jobs (tenant_id, method, spec, name)
      values (${tenantId}, 'seed', ${JSON.stringify(spec)}::jsonb, 'old job') returning id`;
  } finally {
    await sql.end();
    await Deno.remove(before, { recursive: true });
  }
  const db = await openDatabase({ url: t.url, maxConnections: 2 });
  try {
    const old = await getJob(db, { tenantId, jobId });
    assert.equal(old?.submittedSpec, null);
    assert.deepEqual(old?.spec, spec);
    assert.equal(old?.name, "old job");
    // New jobs store it, and only an object.
    const submitted = { env: { id: "sokoban" }, steps: 3 };
    const { job } = await submitJob(db, { tenantId, spec, submittedSpec: submitted });
    assert.deepEqual((await getJob(db, { tenantId, jobId: job.id }))?.submittedSpec, submitted);
    await assert.rejects(
      db.query(`update jobs set submitted_spec = '[1]'::json where id = $1::uuid`, [jobId]),
      /jobs_submitted_spec_object/,
    );
  } finally {
    await db.close();
    await t.drop();
  }
});
