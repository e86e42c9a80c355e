import assert from "node:assert/strict";
import {
  ArchiveError,
  DestinationExistsError,
  DestinationKindError,
  extractVerified,
} from "../../../api/client/extract.ts";

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

Deno.test("files already at the destination stop the extraction before anything is written, and the body is cancelled", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/step-1`);
    await Deno.writeTextFile(`${dir}/step-1/b.txt`, "mine");
    await Deno.symlink(`${dir}/nowhere`, `${dir}/step-1/c.txt`); // a broken link counts too
    const tar = await archive([
      ["SHA256SUMS", ["a", "b", "c"].map((n) => `${HELLO_SHA256}  step-1/${n}.txt\n`).join("")],
      ["step-1/a.txt", "hello"],
      ["step-1/b.txt", "hello"],
      ["step-1/c.txt", "hello"],
    ]);
    // The archive, then a body that does not end until cancelled, as a large download's rest.
    let cancelled = false;
    let endRest = () => {};
    const rest = new Promise<void>((resolve) => endRest = resolve);
    const reader = tar.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) await rest;
        else controller.enqueue(value);
      },
      cancel() {
        cancelled = true;
        endRest();
      },
    }, { highWaterMark: 0 });
    const error = await extractVerified(body, dir).catch((e) => e);
    assert.ok(error instanceof DestinationExistsError, String(error));
    assert.deepEqual(error.paths, [`${dir}/step-1/b.txt`, `${dir}/step-1/c.txt`]);
    assert.equal(
      error.message,
      `Cannot extract the archive into ${dir} as ${dir}/step-1/b.txt and 1 more of its files ` +
        `already exist`,
    );
    assert.equal(await Deno.readTextFile(`${dir}/step-1/b.txt`), "mine");
    await assert.rejects(() => Deno.stat(`${dir}/step-1/a.txt`), Deno.errors.NotFound);
    assert.ok(cancelled, "the body must be cancelled");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("with overwrite, files already at the destination are replaced", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/a.txt`, "mine, longer than hello");
    const body = await archive([["SHA256SUMS", `${HELLO_SHA256}  a.txt\n`], ["a.txt", "hello"]]);
    const files = await extractVerified(body, dir, { overwrite: true });
    assert.deepEqual(files.map((f) => f.sha256), [HELLO_SHA256]);
    assert.equal(await Deno.readTextFile(`${dir}/a.txt`), "hello");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("with overwrite, a link at a file's path is replaced by the file and what it points at is left as it was", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // A link to a file outside the destination, and a broken link.
    await Deno.mkdir(`${dir}/out`);
    await Deno.writeTextFile(`${dir}/outside.txt`, "mine");
    await Deno.symlink(`${dir}/outside.txt`, `${dir}/out/a.txt`);
    await Deno.symlink(`${dir}/nowhere.txt`, `${dir}/out/b.txt`);
    const body = await archive([
      ["SHA256SUMS", `${HELLO_SHA256}  a.txt\n${HELLO_SHA256}  b.txt\n`],
      ["a.txt", "hello"],
      ["b.txt", "hello"],
    ]);
    const files = await extractVerified(body, `${dir}/out`, { overwrite: true });
    assert.deepEqual(files.map((f) => f.sha256), [HELLO_SHA256, HELLO_SHA256]);
    assert.equal(await Deno.readTextFile(`${dir}/outside.txt`), "mine");
    await assert.rejects(() => Deno.lstat(`${dir}/nowhere.txt`), Deno.errors.NotFound);
    for (const name of ["a.txt", "b.txt"]) {
      const info = await Deno.lstat(`${dir}/out/${name}`);
      assert.ok(info.isFile && !info.isSymlink, `${name} must be a file, not a link`);
      assert.equal(await Deno.readTextFile(`${dir}/out/${name}`), "hello");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("with overwrite, a FIFO or socket at a file's path is named and left there, not removed", async () => {
  const dir = await Deno.makeTempDir();
  const socket = Deno.listen({ transport: "unix", path: `${dir}/b.txt` });
  try {
    // A FIFO or device (`/dev/null`) is no stale download: removing one, as root a device, would
    // break whatever uses it.
    const made = await new Deno.Command("mkfifo", { args: [`${dir}/a.txt`] }).output();
    assert.ok(made.success, "mkfifo must make the FIFO");
    for (const [name, kind] of [["a.txt", "a FIFO"], ["b.txt", "a socket"]]) {
      const body = await archive([["SHA256SUMS", `${HELLO_SHA256}  ${name}\n`], [name, "hello"]]);
      const error = await extractVerified(body, dir, { overwrite: true }).catch((e) => e);
      assert.ok(error instanceof DestinationKindError, String(error));
      assert.equal(
        error.message,
        `Cannot extract the archive into ${dir} as ${dir}/${name} must be a file: it is ${kind}`,
      );
    }
    assert.ok((await Deno.lstat(`${dir}/a.txt`)).isFifo, "the FIFO must be left there");
    assert.ok((await Deno.lstat(`${dir}/b.txt`)).isSocket, "the socket must be left there");
  } finally {
    socket.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a file that appears after the check is not written over either", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // The second a.txt meets the file the first one wrote, as it would a file another process
    // created between the check and the write.
    const body = await archive([
      ["SHA256SUMS", `${HELLO_SHA256}  a.txt\n`],
      ["a.txt", "hello"],
      ["a.txt", "other"],
    ]);
    const error = await extractVerified(body, dir).catch((e) => e);
    assert.ok(error instanceof DestinationExistsError, String(error));
    assert.deepEqual(error.paths, [`${dir}/a.txt`]);
    assert.equal(await Deno.readTextFile(`${dir}/a.txt`), "hello");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a large archive extracts without piling up listeners (no MaxListenersExceededWarning)", async () => {
  const { default: process } = await import("node:process");
  const { createHash } = await import("node:crypto");
  const { pack } = await import("tar-stream");
  // 4 MiB arrives in 16 KiB chunks: the extractor asks the feed to wait for a drain many times.
  const bytes = new Uint8Array(4 << 20).map((_, i) => (i * 31) % 251);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const p = pack();
  p.entry({ name: "SHA256SUMS" }, `${sha}  model.bin\n`);
  p.entry({ name: "model.bin" }, bytes as unknown as Buffer);
  p.finalize();
  const chunks: Uint8Array[] = [];
  for await (const chunk of p as AsyncIterable<Uint8Array>) {
    for (let at = 0; at < chunk.byteLength; at += 16_384) {
      chunks.push(chunk.subarray(at, at + 16_384));
    }
  }
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on("warning", onWarning);
  const dir = await Deno.makeTempDir();
  try {
    const files = await extractVerified(ReadableStream.from(chunks), dir);
    assert.deepEqual(files.map((f) => [f.name, f.bytes]), [["model.bin", 4 << 20]]);
    // Node emits the warning on a later tick (process.nextTick): let it.
    await new Promise((r) => process.nextTick(r));
    assert.deepEqual(warnings, []);
  } finally {
    process.off("warning", onWarning);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a body that fails in the middle of a file, or a file that fails its hash, leaves no file under its name", async () => {
  const { createHash } = await import("node:crypto");
  const { pack } = await import("tar-stream");
  const bytes = new Uint8Array(1 << 20).map((_, i) => (i * 7) % 253);
  const sha = createHash("sha256").update(bytes).digest("hex");
  const tarOf = async (sums: string) => {
    const p = pack();
    p.entry({ name: "SHA256SUMS" }, sums);
    p.entry({ name: "a.txt" }, "hello");
    p.entry({ name: "model.bin" }, bytes as unknown as Buffer);
    p.finalize();
    const parts: Uint8Array[] = [];
    for await (const chunk of p as AsyncIterable<Uint8Array>) parts.push(chunk);
    const all = new Uint8Array(parts.reduce((n, c) => n + c.byteLength, 0));
    let at = 0;
    for (const c of parts) all.set(c, (at += c.byteLength) - c.byteLength);
    return all;
  };
  const dir = await Deno.makeTempDir();
  try {
    // The connection drops half-way through model.bin.
    const whole = await tarOf(`${HELLO_SHA256}  a.txt\n${sha}  model.bin\n`);
    let sent = false;
    const cut = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new Error("connection reset"));
        sent = true;
        controller.enqueue(whole.subarray(0, whole.byteLength / 2));
      },
    });
    await assert.rejects(() => extractVerified(cut, `${dir}/cut`), /connection reset/);
    assert.equal(await Deno.readTextFile(`${dir}/cut/a.txt`), "hello");
    await assert.rejects(() => Deno.lstat(`${dir}/cut/model.bin`), Deno.errors.NotFound);
    // A file whose bytes do not match SHA256SUMS is refused and not left there either.
    const bad = await tarOf(`${HELLO_SHA256}  a.txt\n${"0".repeat(64)}  model.bin\n`);
    await assert.rejects(
      () => extractVerified(ReadableStream.from([bad]), `${dir}/bad`),
      /Cannot accept model\.bin as its sha256 must be 0{64}/,
    );
    await assert.rejects(() => Deno.lstat(`${dir}/bad/model.bin`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a file where the archive needs a folder, or a folder where it writes a file, is named as such", async () => {
  const dir = await Deno.makeTempDir();
  const body = () =>
    archive([["SHA256SUMS", `${HELLO_SHA256}  step-3/a.txt\n`], ["step-3/a.txt", "hello"]]);
  const kind = async (outDir: string, overwrite: boolean) => {
    const error = await extractVerified(await body(), outDir, { overwrite }).catch((e) => e);
    assert.ok(error instanceof DestinationKindError, String(error));
    return error.message;
  };
  try {
    await Deno.writeTextFile(`${dir}/file`, "mine");
    for (const overwrite of [false, true]) {
      assert.equal(
        await kind(`${dir}/file`, overwrite),
        `Cannot extract the archive into ${dir}/file as ${dir}/file must be a folder: it is a file`,
      );
    }
    await Deno.mkdir(`${dir}/out`);
    await Deno.writeTextFile(`${dir}/out/step-3`, "mine");
    for (const overwrite of [false, true]) {
      assert.equal(
        await kind(`${dir}/out`, overwrite),
        `Cannot extract the archive into ${dir}/out as ${dir}/out/step-3 must be a folder: it is a ` +
          `file`,
      );
    }
    assert.equal(await Deno.readTextFile(`${dir}/out/step-3`), "mine");
    await Deno.mkdir(`${dir}/dirs/step-3/a.txt`, { recursive: true });
    assert.equal(
      await kind(`${dir}/dirs`, true),
      `Cannot extract the archive into ${dir}/dirs as ${dir}/dirs/step-3/a.txt must be a file: it ` +
        `is a folder`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
