import assert from "node:assert/strict";
import {
  fieldComments,
  README_URL,
  regeneratedReadme,
  replaceSpecSection,
  SPEC_BEGIN,
  SPEC_END,
  SPEC_SOURCE_URL,
  SpecDocsError,
  specFields,
} from "../../../api/tools/spec_docs.ts";

const specSource = await Deno.readTextFile(SPEC_SOURCE_URL);

Deno.test("README.md's JobSpec reference matches the schema (run `deno task docs:spec` when this fails)", async () => {
  const readme = await Deno.readTextFile(README_URL);
  const fresh = await regeneratedReadme(readme, specSource);
  assert.ok(
    fresh === readme,
    "README.md's JobSpec reference is stale: run `deno task docs:spec` and commit README.md",
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

Deno.test("the section between the markers is replaced and the rest is kept", () => {
  const readme = `# T\n\n${SPEC_BEGIN}\nold\n${SPEC_END}\n\nafter\n`;
  assert.equal(
    replaceSpecSection(readme, "new"),
    `# T\n\n${SPEC_BEGIN}\nnew\n${SPEC_END}\n\nafter\n`,
  );
  assert.throws(() => replaceSpecSection("# no markers", "x"), SpecDocsError);
});
