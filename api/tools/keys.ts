/**
 * `deno task keys <command>`: manage API keys in the database named by `DATABASE_URL` (or the
 * embedded PGlite under `SEED_DATA_DIR`, default `.seed`; migrations run on open).
 *
 *   keys create --tenant NAME [--name LABEL]   prints a new key once (creates the tenant if needed)
 *   keys list [--tenant NAME]                  id, tenant, prefix, created, revoked
 *   keys revoke ID_OR_PREFIX                   revokes a key (takes effect within the auth cache
 *                                              TTL)
 */
import { parseArgs } from "node:util";
import { openDatabase } from "../../jobs/db.ts";
import { createKey, listKeys, revokeKey } from "../../jobs/api_keys.ts";

const USAGE = `Usage:
  deno task keys create --tenant NAME [--name LABEL]
  deno task keys list [--tenant NAME]
  deno task keys revoke ID_OR_PREFIX`;

/** Runs the keys command line; returns the process exit code (0 ok, 2 usage error). */
export async function keysMain(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { tenant: { type: "string" }, name: { type: "string" }, help: { type: "boolean" } },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  if (command === "create" && !values.tenant) {
    console.error("Cannot create a key as --tenant NAME is required\n" + USAGE);
    return 2;
  }
  if (command === "revoke" && rest.length !== 1) {
    console.error("Cannot revoke a key as exactly one ID_OR_PREFIX is required\n" + USAGE);
    return 2;
  }
  if (!["create", "list", "revoke"].includes(command)) {
    console.error(
      `Cannot run "${command}" as the command must be create, list or revoke\n${USAGE}`,
    );
    return 2;
  }
  const db = await openDatabase();
  try {
    if (command === "create") {
      const { key, info } = await createKey(db, values.tenant!, { name: values.name });
      console.error(`Created key ${info.prefix}… (id ${info.id}) for tenant ${info.tenant}.`);
      console.error("Store it now: it is shown only once.");
      console.log(key);
    } else if (command === "list") {
      const keys = await listKeys(db, values.tenant);
      console.log(["id", "tenant", "prefix", "name", "created_at", "revoked_at"].join("\t"));
      for (const k of keys) {
        console.log(
          [k.id, k.tenant, k.prefix, k.name ?? "", k.created_at, k.revoked_at ?? ""].join("\t"),
        );
      }
    } else {
      const info = await revokeKey(db, rest[0]);
      console.log(`Revoked key ${info.prefix}… (id ${info.id}) of tenant ${info.tenant}`);
    }
    return 0;
  } finally {
    await db.close();
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await keysMain(Deno.args));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    Deno.exit(1);
  }
}
