/**
 * `deno task gen:env-catalog`: writes the built-in environment catalog (`envCatalog()`) to
 * `jobs/env_catalog.json`, the file the API serves at `GET /v1/envs` and validates submitted `env`
 * fields against. The API never imports workers/ (README.md, Architecture), so the catalog crosses
 * that boundary as this generated file; `tests/jobs/env_catalog_test.ts` fails when it is stale.
 * Run it after changing an environment's id, description, options schema, splits or turn limit.
 */
import { envCatalog } from "./catalog.ts";

/** Path of the generated catalog, relative to the repository root. */
export const ENV_CATALOG_PATH = new URL("../../jobs/env_catalog.json", import.meta.url);

/** The file's text: `envCatalog()` as 2-space-indented JSON with a final newline (fmt-clean). */
export function envCatalogText(): string {
  return JSON.stringify(envCatalog(), null, 2) + "\n";
}

if (import.meta.main) {
  await Deno.writeTextFile(ENV_CATALOG_PATH, envCatalogText());
  console.log(`wrote ${ENV_CATALOG_PATH.pathname}`);
}
