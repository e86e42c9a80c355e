/**
 * What an upload must hold to train here, through real HTTP handling, Postgres and the S3
 * protocol: a tokenizer that cannot spell the environments' prompts or the analysis object is a
 * 422 naming `tokenizer.json` and the text, and a job checkpoint uploaded as a model keeps its
 * model files only (optimizer and trainer state skipped and listed).
 */
import assert from "node:assert/strict";
import { checkModel } from "../../api/main.ts";
import { TOKENIZER_PROBE_TEXTS } from "../../workers/model/upload_check.ts";
import { type ApiFixture, startApiFixture } from "./_fixture.ts";
import { smallQwen3Files } from "./_qwen3_model.ts";
import { tarOf } from "../_harness/tar.ts";

const fx: ApiFixture = await startApiFixture({ checkModel });
const files = smallQwen3Files();
const utf8 = new TextEncoder();

async function upload(archive: Uint8Array) {
  return await fx.app.request(`/v1/models?name=probe`, {
    method: "POST",
    headers: { authorization: `Bearer ${fx.keyA}`, "content-type": "application/x-tar" },
    body: new Uint8Array(archive),
  });
}

async function storedKeys(): Promise<number> {
  return (await fx.store.list(`tenants/${fx.tenantA.id}/models/`)).length;
}

/** A BPE tokenizer of `tokens` (one id each, no merges, no byte fallback). */
function toyTokenizer(tokens: string[]): Uint8Array {
  return utf8.encode(JSON.stringify({
    version: "1.0",
    model: {
      type: "BPE",
      vocab: Object.fromEntries(tokens.map((t, i) => [t, i])),
      merges: [],
    },
  }));
}

Deno.test("a tokenizer of toy tokens is a 422 at tokenizer.json:model.vocab naming the first prompt it cannot spell", async () => {
  const before = await storedKeys();
  const toy = new Map([...files, [
    "tokenizer.json",
    toyTokenizer(Array.from({ length: 64 }, (_, i) => `t${i}`)),
  ]]);
  toy.delete("tokenizer_config.json");
  const res = await upload(await tarOf(toy));
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.deepEqual(body.errors.map((e: { path: string }) => e.path), [
    "tokenizer.json:model.vocab",
  ]);
  const first = TOKENIZER_PROBE_TEXTS[0];
  assert.match(first.source, /^sokoban: first turn prompt$/);
  assert.ok(
    body.detail.includes(
      `cannot spell ${first.source} ${JSON.stringify(first.text.slice(0, 80) + "…")}`,
    ),
    body.detail,
  );
  assert.match(body.detail, /loses "Y" \(non-space character 1\) and decodes as ""$/);
  assert.equal(await storedKeys(), before);
});

Deno.test("a byte-level tokenizer missing one character the analysis object needs names that object and the character", async () => {
  // Qwen3's tokenizer with every vocabulary entry holding `{` removed: no token writes the byte,
  // so the prompts that contain a brace (the analyzer's) and the analysis object cannot be spelled.
  const json = JSON.parse(new TextDecoder().decode(files.get("tokenizer.json")!));
  const vocab = json.model.vocab as Record<string, number>;
  for (const token of Object.keys(vocab)) if (token.includes("{")) delete vocab[token];
  json.model.merges = (json.model.merges as (string | string[])[]).filter((m) =>
    !(Array.isArray(m) ? m.join(" ") : m).includes("{")
  );
  const res = await upload(
    await tarOf(new Map([...files, ["tokenizer.json", utf8.encode(JSON.stringify(json))]])),
  );
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.equal(body.errors[0].path, "tokenizer.json:model.vocab");
  const first = TOKENIZER_PROBE_TEXTS.find((t) => t.text.includes("{"))!;
  assert.ok(body.detail.includes(`cannot spell ${first.source}`), body.detail);
  assert.match(body.detail, /loses "\{"/);
});

Deno.test("a checkpoint's optimizer.safetensors and trainer_state.json are skipped and listed, never stored", async () => {
  const checkpoint = new Map([
    ...files,
    ["optimizer.safetensors", files.get("model.safetensors")!],
    ["trainer_state.json", utf8.encode('{"step": 3}\n')],
  ]);
  const res = await upload(await tarOf(checkpoint, "checkpoint-3/"));
  assert.equal(res.status, 201, await res.clone().text());
  const model = await res.json();
  assert.deepEqual(model.skipped_files.sort(), [
    "checkpoint-3/optimizer.safetensors",
    "checkpoint-3/trainer_state.json",
  ]);
  assert.deepEqual(
    model.files.map((f: { name: string }) => f.name).sort(),
    [...files.keys()].sort(),
  );
  const keys = await fx.store.list(`tenants/${fx.tenantA.id}/models/${model.id}/`);
  assert.ok(!keys.some((k) => /optimizer|trainer_state/.test(k)), String(keys));
});

Deno.test("close the fixture", async () => {
  await fx.close();
});
