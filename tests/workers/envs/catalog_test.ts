import assert from "node:assert/strict";
import { envCatalog, environmentIds } from "../../../workers/envs/mod.ts";

Deno.test("the catalog describes every built-in with its options schema, defaults, splits and turn limit", () => {
  const catalog = envCatalog();
  assert.deepEqual(catalog.envs.map((e) => e.id), environmentIds());
  const sokoban = catalog.envs.find((e) => e.id === "sokoban")!;
  assert.deepEqual(sokoban.defaults, {
    size: 6,
    boxes: 1,
    min_moves: 3,
    end_on_deadlock: true,
    relative_positions: false,
    prompt: "full",
    render: "text",
  });
  assert.equal(sokoban.default_max_turns, 20);
  assert.deepEqual(sokoban.splits.map((s) => s.name), ["train", "test_seen", "test_unseen"]);
  assert.match(sokoban.splits[2].description, /pillar/);
  const props = sokoban.options_schema.properties as Record<string, Record<string, unknown>>;
  assert.equal(props.size.minimum, 6);
  assert.equal(props.size.maximum, 10);
  assert.equal(props.boxes.default, 1);
  assert.equal(sokoban.options_schema.additionalProperties, false);
  assert.equal(sokoban.options_schema.required, undefined);
  assert.deepEqual((props.render as { enum: string[] }).enum, ["text", "image"]);
  const ezpoints = catalog.envs.find((e) => e.id === "ezpoints")!;
  assert.deepEqual(ezpoints.defaults, { render: "image", cards: 2 });
  assert.deepEqual(ezpoints.families, ["sum", "product", "mixed"]);
  assert.match(ezpoints.splits[2].description, /never dealt in training/);
  for (const entry of catalog.envs) {
    assert.ok(entry.description.length > 20);
    assert.ok(entry.families.length >= 1);
    assert.equal(entry.splits.length, 3);
  }
  // The payload is plain JSON.
  assert.deepEqual(JSON.parse(JSON.stringify(catalog)), catalog);
});
