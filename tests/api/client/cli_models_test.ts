/**
 * `seed models …` against the real server (`serveApi` over HTTP, Postgres, the S3 protocol): a
 * small Qwen3 folder on disk (random weights, the real Qwen3 tokenizer) is tarred, streamed with
 * a progress display, listed, shown, re-sent idempotently and deleted.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import process from "node:process";
import { type CliRun, runCli } from "./_run_cli.ts";
import { folderTar, listModelFolder } from "../../../api/client/model_folder.ts";
import { formatBytes, renderBar } from "../../../api/client/progress.ts";
import { serveApi } from "../../../api/main.ts";
import { startApiFixture } from "../_fixture.ts";
import { smallQwen3Files } from "../_qwen3_model.ts";

const fx = await startApiFixture();
for (const [k, v] of Object.entries({ ...fx.s3Env, DATABASE_URL: fx.url })) Deno.env.set(k, v);
const api = await serveApi({ port: 0 });
const env: Record<string, string> = {
  SEED_API_URL: `http://127.0.0.1:${api.port}`,
  SEED_API_KEY: fx.keyA,
};

function run(args: string[]): Promise<CliRun> {
  return runCli(args, env);
}

/** Writes `files` into a new temporary folder, plus entries the CLI must leave out. */
async function modelFolder(files: Map<string, Uint8Array>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "seed-model-" });
  for (const [name, bytes] of files) await Deno.writeFile(`${dir}/${name}`, bytes);
  await Deno.writeTextFile(`${dir}/README.md`, "# small Qwen3\n");
  await Deno.writeTextFile(`${dir}/.gitattributes`, "*.safetensors filter=lfs\n");
  await Deno.writeFile(`${dir}/pytorch_model.bin`, new Uint8Array(100));
  await Deno.mkdir(`${dir}/onnx`);
  await Deno.writeFile(`${dir}/onnx/model.onnx`, new Uint8Array(10));
  return dir;
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

Deno.test("formatBytes and the byte bar read in binary units", () => {
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(31_000_000), "29.6 MiB");
  assert.equal(formatBytes(3.2 * 1024 ** 3), "3.2 GiB");
  assert.equal(
    renderBar({
      status: "uploading",
      stage: "model.safetensors",
      step: 1024 ** 3,
      totalSteps: 4 * 1024 ** 3,
      unit: "bytes",
      etaS: 65,
    }, 8),
    "[##------] 1.0 GiB/4.0 GiB  uploading  model.safetensors  ETA 1m05s",
  );
});

Deno.test("the folder's archive holds its top-level files byte for byte, symlinks followed", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/config.json`, "{}");
    await Deno.writeFile(`${dir}/blob`, new Uint8Array(700).map((_, i) => i % 256));
    await Deno.symlink(`${dir}/blob`, `${dir}/model.safetensors`);
    const folder = await listModelFolder(dir);
    assert.deepEqual(folder.files.map((f) => [f.name, f.bytes]), [
      ["blob", 700],
      ["config.json", 2],
      ["model.safetensors", 700],
    ]);
    const seen: Record<string, number> = {};
    const tar = new Uint8Array(
      await new Response(folderTar(folder.files, (f, n) => seen[f] = (seen[f] ?? 0) + n))
        .arrayBuffer(),
    );
    assert.deepEqual(seen, { blob: 700, "config.json": 2, "model.safetensors": 700 });
    // ustar: 512-byte header, data padded to 512, two zero blocks at the end.
    assert.equal(tar.byteLength, 3 * 512 + 2 * 512 + 512 + 2 * 512 + 1024);
    const name = (at: number) =>
      new TextDecoder().decode(tar.subarray(at, at + 100)).split("\0")[0];
    assert.deepEqual([name(0), name(1536), name(2560)], [
      "blob",
      "config.json",
      "model.safetensors",
    ]);
    const blob = await Deno.readFile(`${dir}/blob`);
    assert.deepEqual([tar.subarray(512, 1212), tar.subarray(3072, 3772)], [blob, blob]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a multi-MB file streams through the archive with no listener left per full buffer (no MaxListenersExceededWarning)", async () => {
  const dir = await Deno.makeTempDir();
  // process.emitWarning is what events.EventEmitter calls, synchronously, on the 11th listener.
  const warnings: string[] = [];
  const emitWarning = process.emitWarning;
  process.emitWarning = ((w: string | Error) => {
    warnings.push(typeof w === "string" ? w : `${w.name}: ${w.message}`);
  }) as typeof process.emitWarning;
  try {
    const bytes = new Uint8Array(4 * 1024 * 1024).map((_, i) => i % 251);
    await Deno.writeFile(`${dir}/model.safetensors`, bytes);
    const folder = await listModelFolder(dir);
    let full = 0;
    const reader = folderTar(folder.files).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) full += r.value.byteLength;
    assert.equal(full, 512 + bytes.byteLength + 1024);
    assert.deepEqual(warnings, []);
  } finally {
    process.emitWarning = emitWarning;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI uploads a model folder with progress, lists, shows, re-sends idempotently and deletes it", async () => {
  const files = smallQwen3Files();
  const dir = await modelFolder(files);
  try {
    const sent = [...files.values()].reduce((s, b) => s + b.byteLength, 0) + 14; // + README.md
    const up = await run([
      "models",
      "upload",
      dir,
      "--name",
      "small",
      "--idempotency-key",
      "cli-once",
    ]);
    assert.equal(up.code, 0, up.err);
    const id = up.out.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.match(
      up.err,
      /^not sent: onnx\/ \(a folder\), pytorch_model\.bin \(weights not in safetensors\)\n/,
    );
    const total = formatBytes(sent);
    assert.match(
      up.err,
      new RegExp(`\\] [0-9.]+ (?:B|KiB|MiB)/${total} {2}uploading {2}model\\.safetensors`),
    );
    assert.match(up.err, new RegExp(`\\[#{24}\\] ${total}/${total} {2}checking\\n`));
    assert.match(
      up.err,
      new RegExp(
        `uploaded model ${id} \\(Qwen3ForCausalLM, \\d+ parameters, 5 files, [0-9.]+ MiB\\); use it as "model": \\{"base": "model:${id}"\\}`,
      ),
    );
    assert.match(up.err, /the service skipped: README\.md\n/);

    const shown = await run(["models", "get", id, "--json"]);
    const model = JSON.parse(shown.out);
    assert.equal(model.name, "small");
    assert.deepEqual(
      model.files.map((f: { name: string; sha256: string }) => [f.name, f.sha256]),
      [...files].sort(([a], [b]) => a < b ? -1 : 1).map(([n, b]) => [n, sha256(b)]),
    );
    const text = await run(["models", "get", id]);
    assert.match(text.out, new RegExp(`^model +${id}\\nbase +model:${id}\\nname +small\\n`));
    assert.match(
      text.out,
      new RegExp(`  ${sha256(files.get("config.json")!)}  \\d+\\tconfig\\.json`),
    );
    const list = await run(["models", "list"]);
    const [header, row] = list.out.split("\n");
    assert.match(header, /^ID +NAME +ARCHITECTURE +PARAMETERS +SIZE +CREATED \(UTC\)$/);
    const count = model.parameter_count.toLocaleString("en-US");
    assert.ok(count.includes(","), count);
    assert.match(
      row,
      new RegExp(
        `^${id} +small +Qwen3ForCausalLM +${count} +${formatBytes(model.bytes)} +` +
          `\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d$`,
      ),
    );

    const objects = await fx.store.list(`tenants/${fx.tenantA.id}/models/`);
    const again = await run([
      "models",
      "upload",
      dir,
      "--name",
      "small",
      "--idempotency-key",
      "cli-once",
    ]);
    assert.equal(again.code, 0, again.err);
    assert.equal(again.out.trim(), id);
    assert.match(again.err, new RegExp(`already uploaded with this Idempotency-Key: model ${id}`));
    assert.deepEqual(await fx.store.list(`tenants/${fx.tenantA.id}/models/`), objects);

    const deleted = await run(["models", "delete", id]);
    assert.equal(deleted.out, `${id}\tdeleted\n`);
    await assert.rejects(
      run(["models", "get", id]),
      /GET \/v1\/models\/[0-9a-f-]+ failed with HTTP 404/,
    );
    assert.deepEqual(await fx.store.list(`tenants/${fx.tenantA.id}/models/${id}/`), []);
    const empty = await run(["models", "list"]);
    assert.equal(empty.code, 0);
    assert.equal(empty.out, "");
    assert.equal(empty.err, "no models\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the CLI shows the server's 422 with the file and field of an invalid folder", async () => {
  const files = smallQwen3Files();
  files.delete("tokenizer.json");
  const dir = await modelFolder(files);
  try {
    await assert.rejects(
      run(["models", "upload", dir]),
      /POST \/v1\/models failed with HTTP 422: .*tokenizer\.json must exist.*\n {2}tokenizer\.json:-: /s,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("models commands without their argument print usage and exit 2; a missing folder is an error", async () => {
  for (
    const args of [["models"], ["models", "upload"], ["models", "get"], ["models", "nope", "x"]]
  ) {
    const res = await run(args);
    assert.equal(res.code, 2, args.join(" "));
    assert.match(res.err, /models upload DIR/);
  }
  await assert.rejects(
    run(["models", "upload", "/nonexistent/model-folder"]),
    /Cannot upload \/nonexistent\/model-folder as it must be a readable folder/,
  );
});

Deno.test({
  name: "stop the models CLI test server and fixture",
  async fn() {
    await api.stop();
    await fx.close();
    for (const k of [...Object.keys(fx.s3Env), "DATABASE_URL"]) Deno.env.delete(k);
  },
  sanitizeOps: false,
  sanitizeResources: false,
});
