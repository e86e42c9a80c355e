import assert from "node:assert/strict";
import { join } from "node:path";
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { IntegrityError } from "../../jobs/errors.ts";
import { checkpointKey, InvalidKeyError, skillsKey } from "../../jobs/keys.ts";
import { openStore, sha256Hex } from "../../jobs/store.ts";
import { startTestStore } from "../_harness/s3.ts";

const MiB = 1024 * 1024;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65_536) crypto.getRandomValues(out.subarray(i, i + 65_536));
  return out;
}

async function findFile(dir: string, suffix: string): Promise<string | undefined> {
  for await (const e of Deno.readDir(dir)) {
    const path = join(dir, e.name);
    if (e.isDirectory) {
      const found = await findFile(path, suffix);
      if (found) return found;
    } else if (e.name.endsWith(suffix)) return path;
  }
  return undefined;
}

Deno.test("the artifact store", async (t) => {
  const s3 = await startTestStore({ multipartBytes: 5 * MiB });
  const { store } = s3;
  try {
    await t.step(
      "a large object round-trips through a multipart upload with its SHA-256",
      async () => {
        const body = randomBytes(12 * MiB + 123);
        const key = checkpointKey("t1", "j1", 10, "model.safetensors");
        const stored = await store.put(key, body);
        assert.equal(stored.bytes, body.byteLength);
        assert.equal(stored.sha256, sha256Hex(body));
        const head = await store.client.send(
          new HeadObjectCommand({ Bucket: store.bucket, Key: key }),
        );
        assert.equal(stored.parts, 3, "three parts of at most 5 MiB");
        assert.equal(head.ContentLength, body.byteLength);
        assert.equal(head.Metadata?.sha256, stored.sha256);
        const back = await store.get(key, { sha256: stored.sha256 });
        assert.equal(back.byteLength, body.byteLength);
        assert.equal(sha256Hex(back), stored.sha256);
      },
    );

    await t.step("a stream of chunks uploads in parts without being held whole", async () => {
      const chunks = Array.from({ length: 11 }, () => randomBytes(MiB));
      async function* source() {
        for (const c of chunks) yield c;
      }
      const key = checkpointKey("t1", "j1", 11, "model.safetensors");
      const stored = await store.putStream(key, source());
      const whole = new Uint8Array(11 * MiB);
      chunks.forEach((c, i) => whole.set(c, i * MiB));
      assert.deepEqual([stored.bytes, stored.parts], [11 * MiB, 3]);
      assert.equal(stored.sha256, sha256Hex(whole));
      assert.equal(sha256Hex(await store.get(key, { sha256: stored.sha256 })), stored.sha256);
      async function* tiny() {
        yield new Uint8Array([1, 2]);
        yield new Uint8Array([3]);
      }
      const small = await store.putStream("small.bin", tiny());
      assert.deepEqual([small.bytes, small.parts], [3, 1]);
      assert.deepEqual(
        await store.get("small.bin", { sha256: small.sha256 }),
        new Uint8Array([1, 2, 3]),
      );
    });

    await t.step("a small object is one PUT and lists under its prefix", async () => {
      const key = skillsKey("t1", "j1", 10);
      const stored = await store.put(key, new TextEncoder().encode('{"skills":[]}'));
      assert.equal(stored.bytes, 13);
      assert.deepEqual(await store.list("tenants/t1/jobs/j1/skills/"), [key]);
    });

    await t.step("an object corrupted at rest is refused on read", async () => {
      const key = checkpointKey("t1", "j2", 1, "config.json");
      const stored = await store.put(key, new TextEncoder().encode('{"hidden_size":64}'));
      // Flip bytes in the server's own file, as a disk or a careless hand would.
      const file = await findFile(s3.directory, "config.json._S3rver_object");
      assert.ok(file, "the object's file is on disk");
      const bytes = await Deno.readFile(file);
      bytes[2] ^= 0xff;
      await Deno.writeFile(file, bytes);
      await assert.rejects(store.get(key, { sha256: stored.sha256 }), IntegrityError);
    });

    await t.step("a presigned URL downloads with plain fetch until it expires", async () => {
      const key = checkpointKey("t1", "j3", 2, "tokenizer.json");
      const body = new TextEncoder().encode('{"model":{}}');
      await store.put(key, body);
      const url = await store.presignGet(key, { expiresInS: 60, filename: "tokenizer.json" });
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.deepEqual(new Uint8Array(await res.arrayBuffer()), body);
      assert.match(res.headers.get("content-disposition") ?? "", /tokenizer\.json/);
      // Signed two hours ago for one minute: expired, without waiting.
      const old = await store.presignGet(key, {
        expiresInS: 60,
        signedAt: new Date(Date.now() - 2 * 3600_000),
      });
      const denied = await fetch(old);
      assert.equal(denied.status, 403);
      assert.match(await denied.text(), /expired/i);
      await assert.rejects(store.presignGet(key, { expiresInS: 0 }), RangeError);
    });

    await t.step("keys refuse unsafe file names and allow one folder in a checkpoint", () => {
      for (
        const name of [
          "../x",
          "a/../b",
          "a/b/c",
          "/a",
          "a//b",
          "./a",
          "a/..",
          "a/.",
          "..",
          "a/",
          "",
        ]
      ) {
        assert.throws(() => checkpointKey("t", "j", 1, name), InvalidKeyError, name);
      }
      assert.equal(
        checkpointKey("t", "j", 1, "merged/config.json", { attempt: 0 }),
        "tenants/t/jobs/j/checkpoints/step-1/attempt-0/merged/config.json",
      );
      assert.throws(() => checkpointKey("t", "j", -1, "a"), RangeError);
      assert.throws(() => skillsKey("t/x", "j", 1), InvalidKeyError);
    });
  } finally {
    await s3.close();
  }
});

Deno.test("the embedded S3 server aborts a multipart upload: its parts leave the disk at once, and only that key's upload can be aborted", async () => {
  const s3 = await startTestStore();
  const { store } = s3;
  const uploads = join(s3.directory, store.bucket, "._S3rver_uploads");
  const start = async (key: string) => {
    const { UploadId } = await store.send<{ UploadId: string }>(
      new CreateMultipartUploadCommand({ Bucket: store.bucket, Key: key }),
    );
    await store.send(
      new UploadPartCommand({
        Bucket: store.bucket,
        Key: key,
        UploadId,
        PartNumber: 1,
        Body: new Uint8Array(1024).fill(7),
        ContentLength: 1024,
      }),
    );
    return UploadId;
  };
  const abort = (key: string, UploadId: string) =>
    store.send(new AbortMultipartUploadCommand({ Bucket: store.bucket, Key: key, UploadId }));
  const open = async () => {
    const ids = [];
    for await (const e of Deno.readDir(uploads)) ids.push(e.name);
    return ids.sort();
  };
  try {
    const a = await start("tenants/t/models/m/a b+c.safetensors");
    const b = await start("tenants/t/models/m/other");
    assert.deepEqual(await open(), [a, b].sort());
    // Another key's id is refused and removes nothing.
    await assert.rejects(abort("tenants/t/models/m/other", a), { name: "NoSuchUpload" });
    assert.deepEqual(await open(), [a, b].sort());
    await abort("tenants/t/models/m/a b+c.safetensors", a);
    assert.deepEqual(await open(), [b]);
    await assert.rejects(abort("tenants/t/models/m/a b+c.safetensors", a), {
      name: "NoSuchUpload",
    });
    await assert.rejects(abort("k", "../../etc"), { name: "NoSuchUpload" });
    await abort("tenants/t/models/m/other", b);
    assert.deepEqual(await open(), []);
  } finally {
    await s3.close();
  }
});

Deno.test("processes in one data folder share one embedded S3 server", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const first = await openStore({ dataDir });
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `import { openStore } from "${new URL("../../jobs/store.ts", import.meta.url)}";
         const s = await openStore({ dataDir: ${JSON.stringify(dataDir)} });
         await s.put("hello.txt", new TextEncoder().encode("hi from the child"));
         console.log(s.endpoint);
         await s.close();`,
      ],
      stdout: "piped",
      stderr: "inherit",
    });
    const out = await child.output();
    assert.ok(out.success);
    assert.equal(new TextDecoder().decode(out.stdout).trim(), first.endpoint);
    assert.equal(new TextDecoder().decode(await first.get("hello.txt")), "hi from the child");
  } finally {
    await first.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a process takes over the embedded S3 server when its owner is killed", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-data-" });
  const owner = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { openStore } from "${new URL("../../jobs/store.ts", import.meta.url)}";
       const s = await openStore({ dataDir: ${JSON.stringify(dataDir)} });
       await s.put("kept.txt", new TextEncoder().encode("stored by the first owner"));
       console.log("ready");
       setInterval(() => {}, 60_000);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    const reader = owner.stdout.pipeThrough(new TextDecoderStream()).getReader();
    assert.match((await reader.read()).value ?? "", /ready/);
    reader.releaseLock();
    store = await openStore({ dataDir });
    const before = store.endpoint;
    owner.kill("SIGKILL");
    await owner.status;
    // The next request is refused, finds the server gone, starts one over the same folder.
    assert.equal(
      new TextDecoder().decode(await store.get("kept.txt")),
      "stored by the first owner",
    );
    assert.notEqual(store.endpoint, before);
  } finally {
    try {
      owner.kill("SIGKILL");
    } catch { /* already gone */ }
    await owner.stdout.cancel().catch(() => {});
    await owner.status;
    await store?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
