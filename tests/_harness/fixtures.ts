/**
 * Shared fixtures of the job tests: a migrated database on a fresh test database, a tenant, and a
 * spec built from the real JobSpec schema.
 */
import { type Database, openDatabase } from "../../jobs/db.ts";
import { tenants } from "../../jobs/schema.ts";
import { type JobSpec, JobSpecSchema } from "../../jobs/spec.ts";
import { createTestDatabase } from "./database.ts";

/** An open, migrated database on a fresh test database; `close()` closes and drops it. */
export interface OpenTestDatabase {
  db: Database;
  url: string;
  close(): Promise<void>;
}

/** Opens `jobs/db.ts` on a fresh database (postgres.js driver). */
export async function openTestDatabase(): Promise<OpenTestDatabase> {
  const t = await createTestDatabase();
  const db = await openDatabase({ url: t.url, maxConnections: 20 });
  return {
    db,
    url: t.url,
    async close() {
      await db.close();
      await t.drop();
    },
  };
}

/** Inserts a tenant with a unique name and returns its id. */
export async function createTenant(db: Database, name?: string): Promise<string> {
  const [row] = await db.orm.insert(tenants).values({
    name: name ?? `tenant-${crypto.randomUUID()}`,
  }).returning({ id: tenants.id });
  return row.id;
}

/** A parsed spec: `{ env: { id: "sokoban" } }` plus `overrides` (top-level fields). */
export function testSpec(overrides: Record<string, unknown> = {}): JobSpec {
  return JobSpecSchema.parse({ env: { id: "sokoban" }, ...overrides });
}
