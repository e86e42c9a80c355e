import assert from "node:assert/strict";
import { ENV_CATALOG, envSpecIssues, modelEnvIssues } from "../../jobs/env_catalog.ts";
import { envCatalog } from "../../workers/envs/catalog.ts";
import { ENV_CATALOG_PATH, envCatalogText } from "../../workers/envs/write_catalog.ts";

Deno.test("the committed jobs/env_catalog.json matches envCatalog() (else: deno task gen:env-catalog)", async () => {
  const committed = await Deno.readTextFile(ENV_CATALOG_PATH);
  assert.deepEqual(
    JSON.parse(committed),
    JSON.parse(JSON.stringify(envCatalog())),
    "jobs/env_catalog.json is stale: run `deno task gen:env-catalog` and commit it",
  );
  assert.equal(committed, envCatalogText());
});

Deno.test("ENV_CATALOG is the committed catalog", () => {
  assert.deepEqual(ENV_CATALOG, JSON.parse(envCatalogText()));
});

Deno.test("each env's defaults pass its own options schema", () => {
  for (const entry of ENV_CATALOG.envs) {
    assert.deepEqual(
      envSpecIssues(ENV_CATALOG.envs, { id: entry.id, options: entry.defaults }),
      [],
    );
    assert.deepEqual(envSpecIssues(ENV_CATALOG.envs, { id: entry.id }), []);
  }
});

Deno.test("envSpecIssues names an unknown id and lists the known ones", () => {
  const issues = envSpecIssues(ENV_CATALOG.envs, { id: "chess" });
  assert.deepEqual(issues.map((i) => [i.path, i.code]), [["env.id", "unknown_env"]]);
  assert.match(issues[0].message, /known: sokoban, household, webshop, ezpoints, search$/);
});

Deno.test("envSpecIssues reports option problems under env.options", () => {
  const issues = envSpecIssues(ENV_CATALOG.envs, {
    id: "sokoban",
    options: { size: 5, end_on_deadlock: "yes" },
  });
  assert.deepEqual(issues.map((i) => i.path), ["env.options.size", "env.options.end_on_deadlock"]);
});

Deno.test("envSpecIssues accepts any id when the catalog is empty and never checks http envs", () => {
  assert.deepEqual(envSpecIssues([], { id: "chess", options: { x: 1 } }), []);
  assert.deepEqual(envSpecIssues(ENV_CATALOG.envs, { id: "https://envs.example/v1" }), []);
});

Deno.test("modelEnvIssues refuses builtin:tiny where the options render images, at model.base", () => {
  const envs = ENV_CATALOG.envs;
  const issuesOf = (base: string, id: string, options?: Record<string, unknown>) =>
    modelEnvIssues(envs, { base, env: { id, options } }).map((i) => [i.path, i.code]);
  const refused = [["model.base", "model_without_image_encoder"]];
  assert.deepEqual(issuesOf("builtin:tiny", "ezpoints"), refused); // image is ezpoints' default
  assert.deepEqual(issuesOf("builtin:tiny", "ezpoints", { cards: 3 }), refused);
  assert.deepEqual(issuesOf("builtin:tiny", "sokoban", { render: "image" }), refused);
  assert.match(
    modelEnvIssues(envs, { base: "builtin:tiny", env: { id: "ezpoints" } })[0].message,
    /tiny-vl/,
  );
  assert.deepEqual(issuesOf("builtin:tiny", "ezpoints", { render: "text" }), []);
  assert.deepEqual(issuesOf("builtin:tiny", "sokoban"), []);
  assert.deepEqual(issuesOf("builtin:tiny-vl", "ezpoints"), []);
  assert.deepEqual(issuesOf("builtin:tiny-vl", "sokoban", { render: "image" }), []);
  assert.deepEqual(issuesOf("s3://b/m/", "ezpoints"), []); // its config is read at start
  assert.deepEqual(issuesOf("builtin:tiny", "https://envs.example/v1", { render: "image" }), []);
});
