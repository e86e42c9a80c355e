import assert from "node:assert/strict";
import {
  fieldComments,
  generatedSpecDocument,
  renderSpecDocument,
  SPEC_DOC_URL,
  SPEC_SOURCE_URL,
  specFields,
} from "../../../api/tools/spec_docs.ts";
import { DEMO_PRESETS } from "../../../jobs/presets.ts";

const specSource = await Deno.readTextFile(SPEC_SOURCE_URL);

Deno.test("jobs/SPEC.md matches the schema (run `deno task docs:spec` when this fails)", async () => {
  const doc = await Deno.readTextFile(SPEC_DOC_URL);
  const fresh = await generatedSpecDocument(specSource);
  assert.ok(
    fresh === doc,
    "jobs/SPEC.md is stale: run `deno task docs:spec` and commit jobs/SPEC.md",
  );
});

Deno.test("every JobSpec field is documented with a type, a default or requiredness, and a meaning", () => {
  const fields = specFields(fieldComments(specSource));
  assert.ok(fields.length > 30);
  for (const f of fields) {
    assert.notEqual(f.description, "", `${f.path} has no description`);
    assert.notEqual(f.type, "", f.path);
  }
  const byPath = new Map(fields.map((f) => [f.path, f]));
  assert.equal(byPath.get("env.id")?.default, "**required**");
  assert.equal(byPath.get("rollout.group_size")?.default, "`8`");
  assert.equal(byPath.get("rollout.group_size")?.bounds, "1–64");
  assert.equal(byPath.get("method")?.type, "`seed` \\| `grpo` \\| `gigpo` \\| `sft`");
});

Deno.test("comments inside a helper apply to every field built from it", () => {
  const comments = fieldComments(specSource);
  const fields = specFields(comments);
  const policy = fields.find((f) => f.path === "warmup.policy.epochs")!;
  const analyzer = fields.find((f) => f.path === "warmup.analyzer.epochs")!;
  assert.equal(policy.description, analyzer.description);
  assert.equal(policy.description, comments.get("*.epochs"));
});

Deno.test("the reference's example is the demo preset, verbatim", () => {
  const doc = renderSpecDocument(specSource);
  assert.ok(doc.includes("```json\n" + JSON.stringify(DEMO_PRESETS.sokoban, null, 2) + "\n```"));
});
