/**
 * drizzle-kit configuration: `deno task db:generate` writes SQL migrations for `jobs/schema.ts`
 * into `migrations/`, which `jobs/db.ts` applies at start-up with drizzle's migrator.
 */
import { defineConfig } from "drizzle-kit";

/** The drizzle-kit config (paths relative to the repository root, where the task runs). */
export const config = defineConfig({
  dialect: "postgresql",
  schema: "./jobs/schema.ts",
  out: "./migrations",
});

// drizzle-kit reads the config file's default export; this is the one default export we keep.
export default config;
