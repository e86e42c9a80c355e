import assert from "node:assert/strict";
import { ArchiveError, extractVerified } from "../../../api/client/extract.ts";

Deno.test("an archive without SHA256SUMS is refused", async () => {
  const { pack } = await import("tar-stream");
  const p = pack();
  p.entry({ name: "a.txt" }, "hello");
  p.finalize();
  const body = ReadableStream.from(p as AsyncIterable<Uint8Array>);
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(() => extractVerified(body, dir), ArchiveError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A tar stream of `entries` in order, `SHA256SUMS` text given as is. */
async function archive(entries: [string, string][]): Promise<ReadableStream<Uint8Array>> {
  const { pack } = await import("tar-stream");
  const p = pack();
  for (const [name, text] of entries) p.entry({ name }, text);
  p.finalize();
  return ReadableStream.from(p as AsyncIterable<Uint8Array>);
}

const HELLO_SHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

Deno.test("an archive entry whose name climbs out of the folder is refused, nothing written outside", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const body = await archive([
      ["SHA256SUMS", `${HELLO_SHA256}  ../escape.txt\n`],
      ["../escape.txt", "hello"],
    ]);
    await assert.rejects(() => extractVerified(body, `${dir}/out`), /must be relative/);
    await assert.rejects(() => Deno.stat(`${dir}/escape.txt`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an archive that lacks a file its SHA256SUMS lists is refused, naming the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const body = await archive([
      ["SHA256SUMS", `${HELLO_SHA256}  a.txt\n${HELLO_SHA256}  b.txt\n`],
      ["a.txt", "hello"],
    ]);
    await assert.rejects(() => extractVerified(body, dir), /lacks b\.txt/);
    assert.equal(await Deno.readTextFile(`${dir}/a.txt`), "hello");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
