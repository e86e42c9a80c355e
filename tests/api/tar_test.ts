import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ChecksumMismatchError, type TarSource, tarStream } from "../../api/tar.ts";
import { extractVerified } from "../../api/client/extract.ts";

function source(name: string, data: Uint8Array, sha256?: string): TarSource {
  return {
    name,
    bytes: data.byteLength,
    sha256: sha256 ?? createHash("sha256").update(data).digest("hex"),
    open: () =>
      Promise.resolve((async function* () {
        for (let i = 0; i < data.byteLength; i += 1000) yield data.subarray(i, i + 1000);
      })()),
  };
}

Deno.test("a streamed archive extracts to the same bytes with every sha256 checked", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const big = crypto.getRandomValues(new Uint8Array(60_000));
    const small = new TextEncoder().encode('{"a":1}');
    const files = await extractVerified(
      tarStream([source("step-2/model.bin", big), source("step-2/config.json", small)]),
      dir,
    );
    assert.deepEqual(files.map((f) => f.name), ["step-2/model.bin", "step-2/config.json"]);
    assert.deepEqual(await Deno.readFile(`${dir}/step-2/model.bin`), big);
    assert.deepEqual(await Deno.readFile(`${dir}/step-2/config.json`), small);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an object whose bytes do not match its recorded sha256 aborts the archive", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const data = new Uint8Array(3000).fill(7);
    const bad = () => tarStream([source("x.bin", data, "0".repeat(64))]);
    await assert.rejects(() => new Response(bad()).arrayBuffer(), ChecksumMismatchError);
    await assert.rejects(() => extractVerified(bad(), dir), ChecksumMismatchError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a reader that cancels mid-object stops the archive reading that object (its stream is closed)", async () => {
  // 32 MiB in 64 KiB chunks: far more than the archive buffers, so the writer waits on the reader.
  const total = 32 * 1024 * 1024;
  let yielded = 0;
  let closed!: () => void;
  const sourceClosed = new Promise<void>((r) => closed = r);
  const archive = tarStream([{
    name: "step-1/model.safetensors",
    bytes: total,
    sha256: "0".repeat(64),
    open: () =>
      Promise.resolve((async function* () {
        try {
          for (let at = 0; at < total; at += 65536) {
            yielded++;
            yield new Uint8Array(65536);
          }
        } finally {
          closed(); // what an S3 GetObject body does on return(): the connection is released
        }
      })()),
  }]);
  const reader = archive.getReader();
  let read = 0;
  while (read < 100_000) read += (await reader.read()).value!.byteLength;
  await reader.cancel();
  // Before the fix the writer waited for a "drain" that never came: this never resolved.
  await sourceClosed;
  assert.ok(yielded < total / 65536, `read ${yielded} chunks of ${total / 65536}`);
});

Deno.test("every entry carries the archive's mtime (a checkpoint's commit time), not 1970", async () => {
  const { extract } = await import("tar-stream");
  const file = source("step-1/a.txt", new TextEncoder().encode("hello"));
  const when = new Date("2026-12-06T18:00:00Z");
  const x = extract();
  const entries: [string, number][] = [];
  const reading = (async () => {
    for await (const e of x) {
      entries.push([e.header.name, e.header.mtime!.getTime()]);
      for await (const _ of e) { /* drain */ }
    }
  })();
  for await (const chunk of tarStream([file], { mtime: when })) x.write(chunk);
  x.end(null);
  await reading;
  assert.deepEqual(entries, [["SHA256SUMS", when.getTime()], ["step-1/a.txt", when.getTime()]]);
});
