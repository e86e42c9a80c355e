/**
 * The embedded object store refuses every request that is not signed with its credentials:
 * before, s3rver served unsigned requests (a bucket listing of every tenant's keys) and ignored
 * V4 signatures, so one presigned URL could be edited into any other object's.
 */
import assert from "node:assert/strict";
import { sigV4Refusal } from "../../../jobs/embedded/_sigv4.ts";
import { ensureLocalS3, LOCAL_S3_CREDENTIALS } from "../../../jobs/embedded/mod.ts";
import { openStore } from "../../../jobs/store.ts";
import { startTestStore } from "../../_harness/s3.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("unsigned, edited and expired requests to the embedded store are refused", async () => {
  const s3 = await startTestStore();
  try {
    await s3.store.put("tenants/a/jobs/j/x.txt", bytes("mine"));
    await s3.store.put("tenants/b/jobs/k/y.txt", bytes("theirs"));
    const url = await s3.store.presignGet("tenants/a/jobs/j/x.txt", { expiresInS: 60 });
    const ok = await fetch(url);
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), "mine");

    const bucket = new URL(url).pathname.split("/")[1];
    const refused = [
      `${s3.endpoint}/${bucket}?list-type=2`,
      `${s3.endpoint}/${bucket}/tenants/b/jobs/k/y.txt`,
      url.replace("tenants/a/jobs/j/x.txt", "tenants/b/jobs/k/y.txt"),
      url.replace(/X-Amz-Expires=\d+/, "X-Amz-Expires=600"),
    ];
    for (const u of refused) {
      const res = await fetch(u);
      const text = await res.text();
      assert.equal(res.status, 403, `${u}: ${text}`);
      assert.match(text, /AccessDenied/);
    }
    const secretFor = (id: string) =>
      id === LOCAL_S3_CREDENTIALS.accessKeyId ? LOCAL_S3_CREDENTIALS.secretAccessKey : undefined;
    assert.equal(sigV4Refusal(new Request(url), secretFor), undefined);
    assert.match(
      sigV4Refusal(new Request(url), secretFor, Date.now() + 61_000) ?? "",
      /expired/,
    );
  } finally {
    await s3.close();
  }
});

Deno.test("a data folder's store uses a private random secret that the public one cannot pass", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-s3-auth-" });
  const local = await ensureLocalS3(dataDir);
  try {
    assert.notEqual(local.credentials.secretAccessKey, LOCAL_S3_CREDENTIALS.secretAccessKey);
    assert.equal((await Deno.stat(`${dataDir}/s3.secret`)).mode! & 0o777, 0o600);
    const store = await openStore({ dataDir, bucket: "seed" });
    try {
      await store.put("tenants/a/k.txt", bytes("ok"));
      assert.equal(new TextDecoder().decode(await store.get("tenants/a/k.txt")), "ok");
      const outsider = await openStore({
        endpoint: local.endpoint,
        bucket: "other",
        ...LOCAL_S3_CREDENTIALS,
      }).then((s) => s.close().then(() => "opened"), (e) => String(e));
      assert.match(outsider, /AccessDenied|403/);
    } finally {
      await store.close();
    }
  } finally {
    await local.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a start lock left by a killed process whose pid came back is not waited on", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "seed-s3-lock-" });
  try {
    // This process's own pid, as a restarted container's process would find it, a minute old.
    await Deno.writeTextFile(`${dataDir}/s3.lock`, String(Deno.pid));
    const minuteAgo = new Date(Date.now() - 60_000);
    await Deno.utime(`${dataDir}/s3.lock`, minuteAgo, minuteAgo);
    const local = await ensureLocalS3(dataDir);
    await local.stop();
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});
