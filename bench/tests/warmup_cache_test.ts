/**
 * bench/_warmup_cache.ts on tiny file trees in temporary folders: the `bench:learn --warmup-cache`
 * key follows the warm-up's code as well as its spec and thread count, so a cache written by other
 * code is not served. No training.
 */
import assert from "node:assert/strict";
import {
  codeDigest,
  warmupCacheKey,
  warmupCodeDigest,
  warmupSourceFiles,
} from "../_warmup_cache.ts";

/** Writes `files` (path relative to `root` → text) under `root`, making folders as needed. */
async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    const parent = `${root}/${path}`.replace(/\/[^/]*$/, "");
    await Deno.mkdir(parent, { recursive: true });
    await Deno.writeTextFile(`${root}/${path}`, text);
  }
}

/** Runs git in `root`; throws with its stderr when it fails. */
async function git(root: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("git", { args, cwd: root, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
}

const SPEC = { method: "sft", env: { id: "sokoban" } } as const;
const TREE = {
  "workers/model/generate.ts": "export const temperature = 1;\n",
  "workers/envs/sokoban/vocab.json": '["up","down"]\n',
  "jobs/spec.ts": "export const lr = 1e-3;\n",
};

Deno.test("the code digest is the same for the same files and changes with a file's content", async () => {
  const a = await Deno.makeTempDir(), b = await Deno.makeTempDir();
  try {
    await writeTree(a, TREE);
    await writeTree(b, TREE);
    const files = Object.keys(TREE);
    const before = await codeDigest(a, files);
    assert.match(before, /^[0-9a-f]{64}$/);
    // Another folder with the same contents, the files listed in another order: the same digest.
    assert.equal(await codeDigest(b, [...files].reverse()), before);
    await Deno.writeTextFile(`${b}/workers/model/generate.ts`, "export const temperature = 0;\n");
    assert.notEqual(await codeDigest(b, files), before);
    // The same bytes under another path, and a missing file against an empty one, differ too.
    await Deno.writeTextFile(`${a}/jobs/other.ts`, TREE["jobs/spec.ts"]);
    assert.notEqual(
      await codeDigest(a, [...files.filter((f) => f !== "jobs/spec.ts"), "jobs/other.ts"]),
      before,
    );
    await Deno.writeTextFile(`${a}/jobs/empty.ts`, "");
    assert.notEqual(
      await codeDigest(a, [...files, "jobs/empty.ts"]),
      await codeDigest(a, [...files, "jobs/gone.ts"]),
    );
  } finally {
    await Deno.remove(a, { recursive: true });
    await Deno.remove(b, { recursive: true });
  }
});

Deno.test("the warm-up cache key changes with the code and the thread count, not otherwise", async () => {
  const code = "c9d0dc2d0db1860012c6f155e9b7facea9addf54466ac4810e14d9104402ac87";
  const key = await warmupCacheKey(SPEC, { threads: 2, code });
  assert.match(key, /^[0-9a-f]{16}$/);
  assert.equal(await warmupCacheKey(structuredClone(SPEC), { threads: 2, code }), key);
  assert.notEqual(await warmupCacheKey(SPEC, { threads: 2, code: "0".repeat(64) }), key);
  assert.notEqual(await warmupCacheKey(SPEC, { threads: 4, code }), key);
  assert.notEqual(
    await warmupCacheKey({ ...SPEC, env: { id: "household" } }, { threads: 2, code }),
    key,
  );
});

Deno.test("the warm-up's sources are the tracked and unignored code files under the listed paths", async () => {
  const root = await Deno.makeTempDir();
  try {
    await git(root, "init", "-q");
    await writeTree(root, {
      ...TREE,
      "workers/README.md": "# docs do not count\n",
      "workers/generated.json": "{}\n",
      ".gitignore": "generated.json\n",
      "api/routes.ts": "export {};\n",
      "deno.lock": "{}\n",
    });
    await git(root, "add", "workers", "jobs", "api", "deno.lock", ".gitignore");
    await writeTree(root, { "workers/envs/new_env.ts": "export {};\n" }); // not added yet
    assert.deepEqual(await warmupSourceFiles(root, ["workers", "jobs", "deno.json", "deno.lock"]), [
      "deno.lock",
      "jobs/spec.ts",
      "workers/envs/new_env.ts",
      "workers/envs/sokoban/vocab.json",
      "workers/model/generate.ts",
    ]);
    // An uncommitted edit of a tracked file is read from the work tree: another digest, and the
    // old content gives the old one back.
    const before = await warmupCodeDigest(root);
    await Deno.writeTextFile(`${root}/jobs/spec.ts`, "export const lr = 3e-4;\n");
    const edited = await warmupCodeDigest(root);
    assert.notEqual(edited, before);
    assert.notEqual(
      await warmupCacheKey(SPEC, { threads: 2, code: edited }),
      await warmupCacheKey(SPEC, { threads: 2, code: before }),
    );
    await Deno.writeTextFile(`${root}/jobs/spec.ts`, TREE["jobs/spec.ts"]);
    assert.equal(await warmupCodeDigest(root), before);
    // Docs and ignored files are not code.
    await Deno.writeTextFile(`${root}/workers/README.md`, "# edited\n");
    await Deno.writeTextFile(`${root}/workers/generated.json`, "[]\n");
    assert.equal(await warmupCodeDigest(root), before);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("listing the warm-up's sources outside a git work tree fails naming the folder", async () => {
  const root = await Deno.makeTempDir();
  try {
    await assert.rejects(
      warmupSourceFiles(root),
      (error: Error) => error.message.includes(root) && /git work tree/.test(error.message),
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
