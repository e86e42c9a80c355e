import assert from "node:assert/strict";
import { README_URL, regeneratedReadme } from "./_layering_docs.ts";
import {
  importCircles,
  type ImportEdge,
  importGraph,
  importSpecifiers,
  layeringViolations,
  layerOf,
  resolveImport,
  sourceFiles,
  unplacedFiles,
} from "./_layering_graph.ts";
import { LAYER_EXCEPTIONS, LAYERS } from "./layering.ts";

const edges = importGraph();

Deno.test("every source file belongs to a part of tests/layering.ts", () => {
  assert.deepEqual(unplacedFiles(sourceFiles()), []);
});

Deno.test("every import keeps to the layering of tests/layering.ts", () => {
  const violations = layeringViolations(edges);
  assert.ok(violations.length === 0, `\n${violations.join("\n")}`);
});

Deno.test("no source file imports itself back through others (no import circle)", () => {
  const circles = importCircles(edges);
  assert.ok(circles.length === 0, circles.map((c) => c.join(" → ")).join("\n"));
});

Deno.test("every relative import resolves to a file of the repository", () => {
  const files = new Set(sourceFiles());
  const missing = edges.filter((e) => /\.(ts|js)$/.test(e.to) && !files.has(e.to));
  assert.deepEqual(missing.map((e) => `${e.from}:${e.line} → ${e.to}`), []);
});

Deno.test("the parts' allowed imports name parts and form no circle", () => {
  const names = new Map(LAYERS.map((l) => [l.name, l]));
  assert.equal(names.size, LAYERS.length, "part names are unique");
  for (const l of LAYERS) {
    for (const i of l.imports) assert.ok(names.has(i), `${l.name} allows unknown part ${i}`);
  }
  const state = new Map<string, "open" | "done">();
  const visit = (name: string, path: string[]) => {
    if (state.get(name) === "done") return;
    assert.notEqual(state.get(name), "open", `circle: ${[...path, name].join(" → ")}`);
    state.set(name, "open");
    for (const i of names.get(name)!.imports) visit(i, [...path, name]);
    state.set(name, "done");
  };
  for (const l of LAYERS) visit(l.name, []);
});

Deno.test("every exception is still an import of the code (a stale one is deleted)", () => {
  for (const x of LAYER_EXCEPTIONS) {
    assert.ok(
      edges.some((e) => e.from === x.from && e.to === x.to),
      `${x.from} no longer imports ${x.to}: delete the exception`,
    );
  }
});

Deno.test("a forbidden import fails naming the importing file, its line and both parts", () => {
  const edge: ImportEdge = { from: "workers/envs/sokoban/mod.ts", to: "jobs/spec.ts", line: 7 };
  const [message, ...rest] = layeringViolations([edge]);
  assert.equal(rest.length, 0);
  assert.match(
    message,
    /^workers\/envs\/sokoban\/mod\.ts:7 imports jobs\/spec\.ts: part "workers\/envs\/sokoban" may not import part "jobs"/,
  );
  assert.deepEqual(
    layeringViolations([{
      from: "workers/seed/trainer.ts",
      to: "workers/seed/run/mod.ts",
      line: 1,
    }])
      .length,
    1,
    "the algorithm may not load the job plumbing",
  );
  // bench and tests never import each other, the suite's fixtures included
  for (
    const [from, to] of [
      ["bench/api.ts", "tests/api/_fixture.ts"],
      ["bench/serve.ts", "tests/_harness/s3.ts"],
      ["tests/jobs/queue_test.ts", "bench/_learn_stats.ts"],
      ["tests/_harness/fixtures.ts", "bench/_lines.ts"],
    ]
  ) {
    assert.equal(layeringViolations([{ from, to, line: 1 }]).length, 1, `${from} → ${to}`);
  }
  assert.deepEqual(
    layeringViolations([{
      from: "bench/tests/learn_stats_test.ts",
      to: "bench/_learn_stats.ts",
      line: 1,
    }]),
    [],
  );
  assert.deepEqual(
    layeringViolations([{ from: "api/main.ts", to: "workers/model/upload_check.ts", line: 1 }]),
    [],
  );
});

Deno.test("a file belongs to the part with the longest matching path", () => {
  assert.equal(layerOf("workers/seed/run/handler.ts")?.name, "workers/seed/run");
  assert.equal(layerOf("workers/seed/trainer.ts")?.name, "workers/seed");
  assert.equal(layerOf("workers/envs/sokoban/room.ts")?.name, "workers/envs/sokoban");
  assert.equal(layerOf("workers/envs/registry.ts")?.name, "workers/envs");
  assert.equal(layerOf("workers/envs/types.ts")?.name, "workers/envs/shared");
  assert.equal(layerOf("tests/_harness/s3.ts")?.name, "harness");
  assert.equal(layerOf("bench/tests/learn_stats_test.ts")?.name, "bench");
  assert.equal(layerOf("migrations/0000.sql"), undefined);
});

Deno.test("imports are read from static, type-only, re-export and dynamic forms", () => {
  const q = '"';
  const source = [
    `import { a } from ${q}./a.ts${q};`,
    `import type { B } from ${q}../b.ts${q};`,
    "import {",
    "  c,",
    `} from ${q}./c.ts${q};`,
    `export * from ${q}./d.ts${q};`,
    `const e = await import(${q}./e.ts${q});`,
    `import ${q}./f.ts${q};`,
    `import { z } from ${q}zod${q};`,
  ].join("\n");
  assert.deepEqual(importSpecifiers(source), [
    { specifier: "./a.ts", line: 1 },
    { specifier: "../b.ts", line: 2 },
    { specifier: "./c.ts", line: 5 },
    { specifier: "./d.ts", line: 6 },
    { specifier: "./e.ts", line: 7 },
    { specifier: "./f.ts", line: 8 },
  ]);
  assert.equal(resolveImport("workers/envs/http/client.ts", "../../../jobs/mod.ts"), "jobs/mod.ts");
});

Deno.test("README.md's architecture map is generated from tests/layering.ts (run `deno task docs:layering` when this fails)", async () => {
  const readme = await Deno.readTextFile(README_URL);
  assert.ok(
    (await regeneratedReadme(readme)) === readme,
    "README.md's layering map is stale: run `deno task docs:layering` and commit README.md",
  );
});
