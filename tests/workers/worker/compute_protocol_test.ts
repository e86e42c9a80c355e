import assert from "node:assert/strict";
import v8 from "node:v8";
import {
  FrameTooLargeError,
  type FromProcess,
  MAX_FRAME_BYTES,
  readFrames,
  writeFrame,
} from "../../../workers/worker/_compute_protocol.ts";

/** A stream of the given chunks. */
const streamOf = (chunks: Uint8Array[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });

/** The bytes `writeFrame` writes for each message, concatenated. */
async function framesOf(messages: FromProcess[]): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const writer = new WritableStream<Uint8Array>({ write: (c) => void parts.push(c) }).getWriter();
  for (const m of messages) await writeFrame(writer, m);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}

Deno.test("frames split at every byte boundary and frames sharing a chunk read back as sent", async () => {
  const messages: FromProcess[] = [
    { kind: "log", level: "info", msg: "one", fields: { bytes: new Uint8Array([1, 2, 3]) } },
    { kind: "done", outcome: "succeeded" },
    { kind: "call", id: 7, op: "emit", args: ["step", { step: 1 }] },
  ];
  const bytes = await framesOf(messages);
  for (const size of [1, 3, 5, bytes.length]) {
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.slice(at, at + size));
    const read: FromProcess[] = [];
    for await (const m of readFrames<FromProcess>(streamOf(chunks))) read.push(m);
    assert.deepEqual(read, messages, `chunks of ${size} bytes`);
  }
});

Deno.test("a 64 MiB frame arriving in 64 KiB chunks reads back whole", async () => {
  const payload = new Uint8Array(64 * 1024 * 1024);
  for (let i = 0; i < payload.length; i += 4096) payload[i] = (i / 4096) % 251;
  const bytes = await framesOf([{ kind: "done", outcome: "x" }, {
    kind: "call",
    id: 1,
    op: "emit",
    args: [payload],
  }]);
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += 65536) chunks.push(bytes.subarray(at, at + 65536));
  const read: FromProcess[] = [];
  for await (const m of readFrames<FromProcess>(streamOf(chunks))) read.push(m);
  assert.equal(read.length, 2);
  const got = (read[1] as { args: Uint8Array[] }).args[0];
  assert.equal(got.length, payload.length);
  assert.deepEqual(got.subarray(0, 8192 * 4), payload.subarray(0, 8192 * 4));
  assert.equal(got[payload.length - 4096], payload[payload.length - 4096]);
});

Deno.test("a length prefix over the frame limit is refused with an error naming the limit", async () => {
  const head = new Uint8Array(4);
  new DataView(head.buffer).setUint32(0, MAX_FRAME_BYTES + 1);
  const read = async () => {
    for await (const _ of readFrames(streamOf([head, new Uint8Array(16)]))) { /* none */ }
  };
  await assert.rejects(read, (e) => {
    assert.ok(e instanceof FrameTooLargeError);
    assert.match(
      e.message,
      new RegExp(`at most ${MAX_FRAME_BYTES} bytes: it is ${MAX_FRAME_BYTES + 1}`),
    );
    return true;
  });
});

Deno.test("a message over the frame limit is refused by the writer and nothing is written", async () => {
  let written = 0;
  const writer = new WritableStream<Uint8Array>({ write: (c) => void (written += c.length) })
    .getWriter();
  const big = new Uint8Array(MAX_FRAME_BYTES + 1);
  await assert.rejects(
    writeFrame(writer, { kind: "call", id: 1, op: "emit", args: [big] }),
    FrameTooLargeError,
  );
  assert.equal(written, 0);
  assert.ok(v8.serialize({ n: 1 }).length < MAX_FRAME_BYTES);
});
