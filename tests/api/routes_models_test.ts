/**
 * `/v1/models` through real HTTP handling, Postgres and the S3 protocol: a small Qwen3 folder
 * (random weights, the real Qwen3 tokenizer) uploaded as a tar stream, validated, listed,
 * referenced by a job and deleted; bad folders are 4xx naming the file and field, with nothing
 * stored.
 */
import assert from "node:assert/strict";
import { checkModel } from "../../api/main.ts";
import { readModelUpload } from "../../api/model_upload.ts";
import { ModelList, ModelUploadView, ModelView } from "../../api/schemas.ts";
import type { ArtifactStore, StoredObject } from "../../jobs/store.ts";
import { type ApiFixture, req, startApiFixture } from "./_fixture.ts";
import { pack as tarPack } from "tar-stream";
import { smallQwen3Files } from "./_qwen3_model.ts";
import { tarOf } from "../_harness/tar.ts";

const fx: ApiFixture = await startApiFixture({ checkModel });
const files = smallQwen3Files();
const archive = await tarOf(
  new Map([...files, ["README.md", new TextEncoder().encode("# hi\n")]]),
  "Qwen3-small/",
);

async function upload(
  body: Uint8Array | ReadableStream<Uint8Array>,
  headers: Record<string, string> = {},
  key = fx.keyA,
  name = "small",
) {
  return await fx.app.request(`/v1/models?name=${name}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/x-tar", ...headers },
    body: body instanceof Uint8Array ? new Uint8Array(body) : body,
  });
}

/**
 * A body that sends the first `bytes` of `archive` in 1 MiB chunks and then fails the way a
 * dropped connection does (`end: "error"`) or just stops (`end: "close"`, a truncated archive).
 */
function cutBody(archive: Uint8Array, bytes: number, end: "error" | "close") {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes) {
        if (end === "error") controller.error(new Error("connection reset by peer"));
        else controller.close();
        return;
      }
      const n = Math.min(1024 * 1024, bytes - at);
      controller.enqueue(archive.slice(at, at + n));
      at += n;
    },
  });
}

/** Multipart uploads the S3 server still holds (their parts on its disk), by upload id. */
async function openUploads(): Promise<string[]> {
  const ids: string[] = [];
  try {
    for await (const e of Deno.readDir(`${fx.s3Directory}/${fx.store.bucket}/._S3rver_uploads`)) {
      ids.push(e.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return ids;
}

/** Objects under the tenant's models/ prefix and rows of the models table. */
async function stored(tenantId: string) {
  const keys = await fx.store.list(`tenants/${tenantId}/models/`);
  const rows = await fx.db.query(`select id from models where tenant_id = $1::uuid`, [tenantId]);
  return { keys: keys.length, rows: rows.length };
}

const withConfig = (patch: Record<string, unknown>) => {
  const json = JSON.parse(new TextDecoder().decode(files.get("config.json")!));
  return new Map([...files, [
    "config.json",
    new TextEncoder().encode(JSON.stringify({ ...json, ...patch })),
  ]]);
};

Deno.test("a Qwen3 folder uploads as a tar stream, is stored byte for byte and listed for its tenant only", async () => {
  const res = await upload(archive);
  assert.equal(res.status, 201, await res.clone().text());
  const model = await res.json();
  assert.equal(model.architecture, "Qwen3ForCausalLM");
  assert.equal(model.base, `model:${model.id}`);
  assert.equal(model.name, "small");
  assert.deepEqual(model.skipped_files, ["Qwen3-small/README.md"]);
  assert.deepEqual(
    model.files.map((f: { name: string }) => f.name).sort(),
    [...files.keys()].sort(),
  );
  // 2 layers × (4 norms incl. q/k + 7 matrices) + embeddings + final norm, tied head.
  const d = 32, v = 151936, q = 64, kv = 32, f = 64;
  assert.equal(
    model.parameter_count,
    v * d + d + 2 * (2 * d + 2 * 16 + q * d + 2 * kv * d + d * q + 3 * f * d),
  );
  const weights = await fx.store.get(
    `tenants/${fx.tenantA.id}/models/${model.id}/model.safetensors`,
  );
  assert.deepEqual(weights, files.get("model.safetensors")); // > 8 MiB: a multipart upload
  const list = await (await req(fx.app, "GET", "/v1/models", { key: fx.keyA })).json();
  assert.ok(list.models.some((m: { id: string }) => m.id === model.id));
  assert.equal((await req(fx.app, "GET", `/v1/models/${model.id}`, { key: fx.keyA })).status, 200);
  assert.equal((await req(fx.app, "GET", `/v1/models/${model.id}`, { key: fx.keyB })).status, 404);
  const other = await (await req(fx.app, "GET", "/v1/models", { key: fx.keyB })).json();
  assert.deepEqual(other.models, []);
});

Deno.test("an upload is idempotent with Idempotency-Key and a different archive under the same key is a 409", async () => {
  const first = await upload(archive, { "idempotency-key": "qwen3-once" });
  assert.equal(first.status, 201);
  const before = await stored(fx.tenantA.id);
  const again = await upload(archive, { "idempotency-key": "qwen3-once" });
  assert.equal(again.status, 200);
  assert.equal((await again.json()).id, (await first.json()).id);
  const other = await upload(await tarOf(withConfig({ rms_norm_eps: 1e-5 })), {
    "idempotency-key": "qwen3-once",
  });
  assert.equal(other.status, 409);
  assert.deepEqual(await stored(fx.tenantA.id), before);
});

Deno.test("the same Idempotency-Key with another name is a 409; another tenant's same key is its own model", async () => {
  const first = await upload(archive, { "idempotency-key": "named-once" });
  assert.equal(first.status, 201);
  const model = await first.json();
  const before = await stored(fx.tenantA.id);
  const renamed = await upload(archive, { "idempotency-key": "named-once" }, fx.keyA, "other");
  assert.equal(renamed.status, 409);
  assert.match((await renamed.json()).detail, new RegExp(`same archive and name: .*${model.id}`));
  const again = await upload(archive, { "idempotency-key": "named-once" });
  assert.equal(again.status, 200);
  const replay = await again.json();
  assert.equal(replay.id, model.id);
  assert.deepEqual(replay.skipped_files, model.skipped_files);
  assert.deepEqual(await stored(fx.tenantA.id), before);
  const otherTenant = await upload(archive, { "idempotency-key": "named-once" }, fx.keyB);
  assert.equal(otherTenant.status, 201);
  assert.notEqual((await otherTenant.json()).id, model.id);
});

Deno.test("a name with control characters (NUL, ESC) is a 400 naming it, and nothing is stored", async () => {
  const before = await stored(fx.tenantA.id);
  for (const name of ["a%00b", "a%0Ab%1B%5B31m"]) {
    const res = await upload(archive, {}, fx.keyA, name);
    assert.equal(res.status, 400, name);
    assert.equal((await res.json()).errors[0].path, "name");
  }
  assert.deepEqual(await stored(fx.tenantA.id), before);
});

Deno.test("an empty body or an archive without entries is a 400 naming the body, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  const emptyTar = await tarOf(new Map());
  assert.equal(emptyTar.byteLength, 1024); // only the end-of-archive blocks
  for (
    const [body, detail] of [[new Uint8Array(0), /it is empty/], [emptyTar, /holds none/]] as const
  ) {
    const res = await upload(body, {}, fx.keyB);
    assert.equal(res.status, 400, await res.clone().text());
    const problem = await res.json();
    assert.match(problem.detail, detail);
    assert.equal(problem.errors[0].path, "body");
  }
  const none = await fx.app.request("/v1/models", {
    method: "POST",
    headers: { authorization: `Bearer ${fx.keyB}`, "content-type": "application/x-tar" },
  });
  assert.equal(none.status, 400);
  assert.equal((await none.json()).errors[0].path, "body");
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("an upload cut off inside a multipart weights file leaves no model and no objects; a retry with its key then succeeds", async () => {
  const before = await stored(fx.tenantB.id);
  // 12 MiB: inside model.safetensors (bytes 3,072 to 19.5 M), after its first 8 MiB part.
  const cut = 12 * 1024 * 1024;
  for (const end of ["error", "close"] as const) {
    const res = await upload(cutBody(archive, cut, end), { "idempotency-key": "cut" }, fx.keyB);
    assert.equal(res.status, 400, end);
    const problem = await res.json();
    assert.equal(problem.errors[0].path, "body");
    assert.equal(problem.errors[0].code, end === "error" ? "incomplete" : "invalid_tar");
    if (end === "error") assert.match(problem.detail, /must arrive whole: .*after 12582912 bytes/);
    assert.deepEqual(await stored(fx.tenantB.id), before, end);
    // The weights' multipart upload was aborted when the upload failed: its 8 MiB part is not
    // left on the server's disk for the sweeper's 24 h grace.
    assert.deepEqual(await openUploads(), [], end);
  }
  const retry = await upload(archive, { "idempotency-key": "cut" }, fx.keyB);
  assert.equal(retry.status, 201, await retry.clone().text());
});

Deno.test("a client that disconnects over TCP mid-upload frees it: the handler ends with a 400 and nothing is stored", async () => {
  // Real sockets (Deno.serve), not app.request(): the body stream must fail when the peer goes
  // away, under Deno's legacy request abort and under --unstable-no-legacy-abort alike.
  const before = await stored(fx.tenantB.id);
  let answered!: (res: Response) => void;
  const answer = new Promise<Response>((r) => answered = r);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    const res = await fx.app.fetch(r);
    answered(res.clone());
    return res;
  });
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
    const head = [
      "POST /v1/models HTTP/1.1",
      "host: 127.0.0.1",
      `authorization: Bearer ${fx.keyB}`,
      "content-type: application/x-tar",
      `content-length: ${archive.byteLength}`,
    ].join("\r\n") + "\r\n\r\n";
    await conn.write(new TextEncoder().encode(head));
    const cut = 12 * 1024 * 1024; // inside model.safetensors, after its first 8 MiB part
    for (let at = 0; at < cut;) at += await conn.write(archive.subarray(at, cut));
    conn.close();
    const res = await answer;
    assert.equal(res.status, 400);
    const problem = await res.json();
    assert.equal(problem.errors[0].code, "incomplete");
    assert.match(problem.detail, /must arrive whole: reading it failed after 12582912 bytes/);
    assert.deepEqual(await stored(fx.tenantB.id), before);
    assert.deepEqual(await openUploads(), []);
  } finally {
    await server.shutdown();
  }
});

Deno.test("weights larger than the store's part size are streamed to S3 as a multipart upload", async () => {
  const prefix = `tenants/${fx.tenantA.id}/models/${crypto.randomUUID()}/`;
  const streamed: StoredObject[] = [];
  const target: Pick<ArtifactStore, "put" | "putStream" | "delete"> = {
    put: (key, bytes, options) => fx.store.put(key, bytes, options),
    putStream: async (key, source, options) => {
      const out = await fx.store.putStream(key, source, options);
      streamed.push(out);
      return out;
    },
    delete: (key) => fx.store.delete(key),
  };
  const body = new Blob([new Uint8Array(archive)]).stream();
  const read = await readModelUpload(body, { store: target, prefix });
  const weights = files.get("model.safetensors")!;
  const parts = Math.ceil(weights.byteLength / fx.store.multipartBytes);
  assert.ok(parts > 1);
  assert.deepEqual(
    streamed.map((o) => [o.key, o.bytes, o.parts]),
    [[`${prefix}model.safetensors`, weights.byteLength, parts]],
  );
  assert.deepEqual(await fx.store.get(`${prefix}model.safetensors`), weights);
  await Promise.all(read.files.map((f) => fx.store.delete(f.key)));
});

Deno.test("the OpenAPI document describes /v1/models as the routes answer it", async () => {
  const doc = await (await req(fx.app, "GET", "/openapi.json")).json();
  const post = doc.paths["/v1/models"].post;
  assert.deepEqual(Object.keys(post.requestBody.content), ["application/x-tar"]);
  assert.deepEqual(
    post.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
    ["query:name", "header:Idempotency-Key"],
  );
  for (const status of ["200", "201", "400", "401", "409", "413", "415", "422"]) {
    assert.ok(post.responses[status], `POST ${status}`);
  }
  assert.equal(
    post.responses["201"].content["application/json"].schema.$ref,
    "#/components/schemas/ModelUpload",
  );
  assert.deepEqual(Object.keys(doc.paths["/v1/models"]).sort(), ["get", "post"]);
  assert.deepEqual(Object.keys(doc.paths["/v1/models/{id}"]).sort(), ["delete", "get"]);
  assert.ok(doc.paths["/v1/models/{id}"].delete.responses["409"]);
  // Real answers carry exactly the documented fields, and parse with the schemas documented.
  const res = await upload(archive, {}, fx.keyB, "doc");
  const created = await res.json();
  const schemas = doc.components.schemas;
  assert.deepEqual(Object.keys(created).sort(), Object.keys(schemas.ModelUpload.properties).sort());
  assert.deepEqual([...schemas.ModelUpload.required].sort(), Object.keys(created).sort());
  ModelUploadView.strict().parse(created);
  const one = await (await req(fx.app, "GET", `/v1/models/${created.id}`, { key: fx.keyB })).json();
  assert.deepEqual(Object.keys(one).sort(), Object.keys(schemas.Model.properties).sort());
  ModelView.strict().parse(one);
  ModelList.parse(await (await req(fx.app, "GET", "/v1/models", { key: fx.keyB })).json());
  assert.equal(
    (await req(fx.app, "DELETE", `/v1/models/${created.id}`, { key: fx.keyB })).status,
    204,
  );
});

Deno.test("invalid folders are a 422 naming the file and field, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  const cases: [Map<string, Uint8Array>, RegExp, string][] = [
    [
      withConfig({ architectures: ["MistralForCausalLM"] }),
      /architectures must be/,
      "config.json:architectures",
    ],
    [
      withConfig({ architectures: undefined, model_type: "mistral" }),
      /model_type must be llama, qwen2 or qwen3/,
      "config.json:model_type",
    ],
    [
      withConfig({ intermediate_size: 65 }),
      /must have shape \[65,32\]/,
      "model.safetensors:model.layers.0.mlp.gate_proj.weight.shape",
    ],
    [
      withConfig({ rope_scaling: { rope_type: "llama3", factor: 8 } }),
      /rope_scaling.low_freq_factor must be set/,
      "config.json:rope_scaling.low_freq_factor",
    ],
    [
      withConfig({ vocab_size: 1000, tie_word_embeddings: true }),
      /shape/,
      "model.safetensors:model.embed_tokens.weight.shape",
    ],
    [
      new Map([...files, [
        "tokenizer_config.json",
        new TextEncoder().encode(JSON.stringify({ chat_template: "{% for m in %}{{ m }}" })),
      ]]),
      /chat_template must be a valid Jinja template/,
      "tokenizer_config.json:chat_template",
    ],
    [
      // Refused by the config's bounds before any loop over the layers (it once ran out of memory).
      withConfig({ num_hidden_layers: 1_000_000_000 }),
      /num_hidden_layers/,
      "config.json:num_hidden_layers",
    ],
    [
      // Qwen2's head_dim must be hidden_size / heads (32 / 4 = 8); it was refused only later, as
      // the q_proj weight's shape, which named the wrong field.
      withConfig({ architectures: ["Qwen2ForCausalLM"], model_type: "qwen2", head_dim: 16 }),
      /head_dim must be hidden_size \/ num_attention_heads \(32 \/ 4\) for Qwen2ForCausalLM/,
      "config.json:head_dim",
    ],
    [
      withConfig({
        architectures: ["Qwen2ForCausalLM"],
        model_type: "qwen2",
        num_attention_heads: 5,
        num_key_value_heads: 5,
        head_dim: 6,
      }),
      /head_dim must be hidden_size \/ num_attention_heads \(32 \/ 5\)/,
      "config.json:head_dim",
    ],
    [
      new Map([...files].filter(([k]) => k !== "tokenizer.json")),
      /tokenizer.json must exist/,
      "tokenizer.json:-",
    ],
  ];
  for (const [folder, detail, path] of cases) {
    const res = await upload(await tarOf(folder), {}, fx.keyB);
    assert.equal(res.status, 422, path);
    assert.match(res.headers.get("content-type") ?? "", /problem\+json/);
    const problem = await res.json();
    assert.match(problem.detail, detail);
    assert.equal(problem.errors[0].path, path);
  }
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("a sharded folder is checked through its index: a missing shard names the index entry", async () => {
  const sharded = smallQwen3Files({ maxShardBytes: 4_000_000 });
  const shards = [...sharded.keys()].filter((k) => k.endsWith(".safetensors"));
  assert.ok(shards.length > 1);
  const ok = await upload(await tarOf(sharded), {}, fx.keyB);
  assert.equal(ok.status, 201, await ok.clone().text());
  const before = await stored(fx.tenantB.id);
  const missing = new Map([...sharded].filter(([k]) => k !== shards[1]));
  const res = await upload(await tarOf(missing), {}, fx.keyB);
  assert.equal(res.status, 422);
  const problem = await res.json();
  assert.match(problem.errors[0].path, /^model\.safetensors\.index\.json:weight_map\./);
  assert.match(problem.detail, new RegExp(`shard ${shards[1]}`));
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

/** A safetensors file rebuilt with `edit` applied to its header and data section. */
function editSafetensors(
  bytes: Uint8Array,
  edit: (
    header: Record<string, { data_offsets: [number, number] }>,
    data: Uint8Array,
  ) => Uint8Array,
): Uint8Array {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  const data = edit(header, bytes.subarray(8 + n));
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  out.set(data, 8 + json.byteLength);
  return out;
}

/** Posts `folder` as a tar (entries under `prefix`), expecting `status` and the problem's path. */
async function refused(
  folder: Map<string, Uint8Array>,
  status: number,
  path: string,
  detail: RegExp,
  prefix = "",
) {
  const res = await upload(await tarOf(folder, prefix), {}, fx.keyB);
  const text = await res.clone().text();
  assert.equal(res.status, status, text);
  const problem = await res.json();
  assert.equal(problem.errors[0].path, path, text);
  assert.match(problem.detail, detail);
}

Deno.test("a safetensors file whose tensors leave bytes after the last one, a gap or an overlap is a 422 naming the tensor, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  const weights = files.get("model.safetensors")!;
  const withWeights = (bytes: Uint8Array) => new Map([...files, ["model.safetensors", bytes]]);
  const order = (h: Record<string, { data_offsets: [number, number] }>) =>
    Object.entries(h).filter(([k]) => k !== "__metadata__")
      .sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0]);
  // 16 bytes past the end of the last tensor: no loader reads them, the reference refuses them.
  const trailing = new Uint8Array(weights.byteLength + 16);
  trailing.set(weights);
  const last = order(headerOf(weights)).at(-1)![0];
  await refused(
    withWeights(trailing),
    422,
    `model.safetensors:${last}.data_offsets`,
    /must fill its \d+-byte data section: the last, .* \(16 bytes follow\)/,
  );
  // An 8-byte gap before the second tensor (every later offset shifted, the data with it).
  let second = "";
  const gap = editSafetensors(weights, (h, d) => {
    const [, [name, t]] = order(h);
    second = name;
    const at = t.data_offsets[0];
    for (const [, e] of order(h)) {
      if (e.data_offsets[0] >= at) e.data_offsets = [e.data_offsets[0] + 8, e.data_offsets[1] + 8];
    }
    const out = new Uint8Array(d.byteLength + 8);
    out.set(d.subarray(0, at));
    out.set(d.subarray(at), at + 8);
    return out;
  });
  await refused(
    withWeights(gap),
    422,
    `model.safetensors:${second}.data_offsets`,
    /without gaps or overlaps: .* leaves a 8-byte gap/,
  );
  // The last tensor moved 4 bytes back into the one before it (and 4 bytes trail).
  const overlap = editSafetensors(weights, (h, d) => {
    const e = order(h).at(-1)![1];
    e.data_offsets = [e.data_offsets[0] - 4, e.data_offsets[1] - 4];
    return d;
  });
  await refused(
    withWeights(overlap),
    422,
    `model.safetensors:${last}.data_offsets`,
    /overlaps the tensor before it/,
  );
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

/** The parsed header of a safetensors file. */
function headerOf(bytes: Uint8Array): Record<string, { data_offsets: [number, number] }> {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
}

Deno.test("an index entry that its shard does not hold is a 422 naming the shard and the tensor", async () => {
  const sharded = smallQwen3Files({ maxShardBytes: 4_000_000 });
  const index = JSON.parse(
    new TextDecoder().decode(sharded.get("model.safetensors.index.json")!),
  );
  const [tensor, shard] = Object.entries(index.weight_map as Record<string, string>).at(-1)!;
  // The shard loses the tensor (the index still points there); the data shrinks with it.
  const bytes = editSafetensors(sharded.get(shard)!, (h, d) => {
    const [begin, end] = h[tensor].data_offsets;
    delete h[tensor];
    for (const [k, e] of Object.entries(h)) {
      if (k !== "__metadata__" && e.data_offsets[0] >= end) {
        e.data_offsets = [e.data_offsets[0] - (end - begin), e.data_offsets[1] - (end - begin)];
      }
    }
    const out = new Uint8Array(d.byteLength - (end - begin));
    out.set(d.subarray(0, begin));
    out.set(d.subarray(end), begin);
    return out;
  });
  const before = await stored(fx.tenantB.id);
  await refused(
    new Map([...sharded, [shard, bytes]]),
    422,
    `${shard}:${tensor}`,
    new RegExp(`must hold ${tensor.replaceAll(".", "\\.")} \\(model\\.safetensors\\.index\\.json`),
  );
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("an entry with an absolute path or .. is a 400 naming it, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  for (const bad of ["../config.json", "/etc/config.json", "Qwen3-small/../../x.json"]) {
    // The bad entry comes last, after the weights were stored: they must be deleted too.
    const folder = new Map([...files, [bad, new TextEncoder().encode("{}")]]);
    await refused(
      folder,
      400,
      "body",
      new RegExp(`entry ${JSON.stringify(bad)} must be a relative`),
    );
  }
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("an archive of two top-level folders is a 400 naming them, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  const two = new Map([...files].map(([k, v], i) => [`${i % 2 ? "a" : "b"}/${k}`, v]));
  await refused(two, 400, "body", /holds 2 top-level folders \("b\/", "a\/"\)/);
  // The same files all under one folder are the model.
  const one = await upload(await tarOf(files, "only/"), {}, fx.keyB);
  assert.equal(one.status, 201, await one.clone().text());
  const model = await one.json();
  assert.deepEqual(await stored(fx.tenantB.id), {
    keys: before.keys + files.size,
    rows: before.rows + 1,
  });
  await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyB });
});

Deno.test("top-level symbolic links are the folder's entries, not folders: a cache snapshot tarred without -h lacks config.json", async () => {
  // A Hugging Face cache snapshot holds links into ../../blobs; tar stores them as links.
  const p = tarPack();
  for (const name of ["config.json", "model.safetensors", "tokenizer.json"]) {
    p.entry({ name, type: "symlink", linkname: `../../blobs/${name}` });
  }
  p.finalize();
  const body = new Uint8Array(
    await new Response(ReadableStream.from(p as AsyncIterable<Uint8Array>)).arrayBuffer(),
  );
  const res = await upload(body, {}, fx.keyB);
  assert.equal(res.status, 422, await res.clone().text());
  assert.equal((await res.json()).errors[0].path, "config.json:-");
});

Deno.test("hidden files and a flat archive's subfolders are skipped and listed, never stored", async () => {
  const text = (t: string) => new TextEncoder().encode(t);
  // Llama 3.2's layout: original/ holds a tokenizer.model and params.json of its own; the
  // subfolder's files come first, before any top-level file says the archive is flat.
  const folder = new Map<string, Uint8Array>([
    ["original/params.json", text("{}")],
    ["original/tokenizer.model", text("not the model's tokenizer")],
    [".gitattributes", text("*.safetensors filter=lfs\n")],
    [".hidden.json", text("{}")],
    [".cache/huggingface/download/config.json", text("{}")],
    ...files,
  ]);
  const res = await upload(await tarOf(folder, "./"), {}, fx.keyB);
  assert.equal(res.status, 201, await res.clone().text());
  const model = await res.json();
  assert.deepEqual(
    model.files.map((f: { name: string }) => f.name).sort(),
    [...files.keys()].sort(),
  );
  assert.deepEqual(model.skipped_files.sort(), [
    "./.cache/huggingface/download/config.json",
    "./.gitattributes",
    "./.hidden.json",
    "./original/params.json",
    "./original/tokenizer.model",
  ]);
  const keys = await fx.store.list(`tenants/${fx.tenantB.id}/models/${model.id}/`);
  assert.deepEqual(
    keys.map((k) => k.split("/").at(-1)).sort(),
    [...files.keys()].sort(),
  );
  await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyB });
});

Deno.test("thousands of skipped entries are counted, the first 100 listed, and none is kept in the answer", async () => {
  const folder = new Map(files);
  for (let i = 0; i < 3000; i++) folder.set(`notes/n${i}.txt`, new Uint8Array(0));
  // notes/ files lie in a subfolder of a flat archive: skipped.
  const res = await upload(await tarOf(folder), {}, fx.keyB);
  assert.equal(res.status, 201, await res.clone().text());
  const model = await res.json();
  assert.equal(model.skipped_file_count, 3000);
  assert.equal(model.skipped_files.length, 100);
  assert.deepEqual(model.skipped_files.slice(0, 2), ["notes/n0.txt", "notes/n1.txt"]);
  ModelUploadView.strict().parse(model);
  await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyB });
});

Deno.test("a config.json or tokenizer file nested 100 000 deep, with a NUL or a lone surrogate is a 422 naming the file, and nothing is stored", async () => {
  const before = await stored(fx.tenantB.id);
  const configText = new TextDecoder().decode(files.get("config.json")!);
  /** config.json with `"extra": <raw JSON text>` added before its closing brace. */
  const configWith = (raw: string) =>
    new TextEncoder().encode(configText.replace(/}\s*$/, `, "extra": ${raw}}`));
  const deep = "[".repeat(100_000) + "]".repeat(100_000);
  const cases: [string, Uint8Array, string, string][] = [
    ["config.json", configWith(deep), "too_deep", "config.json:extra"],
    ["config.json", configWith(`"a\\u0000b"`), "invalid_string", "config.json:extra"],
    ["config.json", configWith(`{"k": "\\ud800"}`), "invalid_string", "config.json:extra.k"],
    [
      "tokenizer_config.json",
      new TextEncoder().encode(`{"eos_token": "\\udc00x"}`),
      "invalid_string",
      "tokenizer_config.json:eos_token",
    ],
  ];
  for (const [name, bytes, code, path] of cases) {
    const res = await upload(await tarOf(new Map([...files, [name, bytes]])), {}, fx.keyB);
    const text = await res.clone().text();
    assert.equal(res.status, 422, text);
    const problem = await res.json();
    assert.equal(problem.errors[0].code, code, text);
    assert.equal(problem.errors[0].path.slice(0, path.length), path, text);
    assert.match(problem.detail, new RegExp(`^Cannot accept ${name.replace(".", "\\.")} as`));
  }
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("a safetensors file whose header is not JSON or is cut short is a 422 and its object is deleted", async () => {
  const before = await stored(fx.tenantB.id);
  const weights = files.get("model.safetensors")!;
  const notJson = weights.slice();
  notJson[8] = 0x7e; // "~": the header's first byte
  const header = Number(new DataView(weights.buffer, weights.byteOffset).getBigUint64(0, true));
  const cut = weights.slice(0, 8 + Math.floor(header / 2));
  for (const [bytes, detail] of [[notJson, /header must be JSON/], [cut, /truncated/]] as const) {
    // The weights come first so that they are stored before the upload fails.
    const folder = new Map([
      ["model.safetensors", bytes],
      ...[...files].filter(([k]) => k !== "model.safetensors"),
    ]);
    const res = await upload(await tarOf(folder), {}, fx.keyB);
    const text = await res.clone().text();
    assert.equal(res.status, 422, text);
    assert.match((await res.json()).detail, detail);
    assert.deepEqual(await stored(fx.tenantB.id), before, text);
  }
});

Deno.test("a wrong content type is a 415, an unreadable archive a 400", async () => {
  const json = await upload(archive, { "content-type": "application/json" });
  assert.equal(json.status, 415);
  const garbage = await upload(new Uint8Array(1024).fill(7));
  assert.equal(garbage.status, 400);
});

Deno.test("a job names an uploaded model as model:<id>; the model cannot be deleted while the job is queued", async () => {
  const model = await (await upload(archive)).json();
  const spec = { env: { id: "sokoban" }, model: { base: model.base } };
  assert.equal((await req(fx.app, "POST", "/v1/jobs", { key: fx.keyB, json: spec })).status, 422);
  const submitted = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: spec });
  assert.equal(submitted.status, 201, await submitted.clone().text());
  const job = await submitted.json();
  const refused = await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyA });
  assert.equal(refused.status, 409);
  const detail = (await refused.json()).detail;
  assert.match(detail, new RegExp(job.id));
  assert.ok(
    detail.includes(
      `wait for it to end, or cancel it first with \`seed cancel ${job.id}\` or \`POST /v1/jobs/${job.id}/cancel\``,
    ),
    detail,
  );
  assert.equal(
    (await req(fx.app, "POST", `/v1/jobs/${job.id}/cancel`, { key: fx.keyA })).status,
    202,
  );
  assert.equal(
    (await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyB })).status,
    404,
  );
  assert.equal(
    (await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyA })).status,
    204,
  );
  assert.equal((await req(fx.app, "GET", `/v1/models/${model.id}`, { key: fx.keyA })).status, 404);
  assert.deepEqual(await fx.store.list(`tenants/${fx.tenantA.id}/models/${model.id}/`), []);
});

Deno.test("a model a queued job uses through a job: chain of LoRA adapters cannot be deleted either", async () => {
  const model = await (await upload(archive)).json();
  // A LoRA job without merged weights: its checkpoints are an adapter that applies to the model.
  const direct = { env: { id: "sokoban" }, model: { base: model.base, lora: { rank: 4 } } };
  const first = await (await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: direct }))
    .json();
  const chained = { env: { id: "sokoban" }, model: { base: `job:${first.id}@0` } };
  const second = await req(fx.app, "POST", "/v1/jobs", { key: fx.keyA, json: chained });
  assert.equal(second.status, 201, await second.clone().text());
  const continued = await second.json();
  assert.equal(
    (await req(fx.app, "POST", `/v1/jobs/${first.id}/cancel`, { key: fx.keyA })).status,
    202,
  );
  // The first job is cancelled; the continuation still needs the model at its root.
  const refused = await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyA });
  assert.equal(refused.status, 409);
  assert.match((await refused.json()).detail, new RegExp(continued.id));
  assert.equal(
    (await req(fx.app, "POST", `/v1/jobs/${continued.id}/cancel`, { key: fx.keyA })).status,
    202,
  );
  assert.equal(
    (await req(fx.app, "DELETE", `/v1/models/${model.id}`, { key: fx.keyA })).status,
    204,
  );
});

Deno.test("an archive over the size limit is a 413 and leaves nothing", async () => {
  const { createApp } = await import("../../api/app.ts");
  const small = createApp({
    db: fx.db,
    store: fx.store,
    authCacheMs: 0,
    checkModel,
    modelUploadLimits: { totalBytes: 1_000_000 },
  });
  const before = await stored(fx.tenantB.id);
  const res = await small.request("/v1/models", {
    method: "POST",
    headers: { authorization: `Bearer ${fx.keyB}`, "content-type": "application/x-tar" },
    body: new Uint8Array(archive),
  });
  assert.equal(res.status, 413);
  assert.deepEqual(await stored(fx.tenantB.id), before);
});

Deno.test("close the fixture", async () => {
  await fx.close();
});
