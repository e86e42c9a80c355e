import assert from "node:assert/strict";
import {
  f16ToF32,
  f32ToBf16Bits,
  parseShardIndex,
  readSafetensors,
  readShardedSafetensors,
  SafetensorsError,
  type Tensor,
  writeSafetensors,
} from "../../../workers/model/safetensors.ts";

/** Builds a safetensors file by hand: header JSON (unpadded) + raw bytes. */
function handMade(header: Record<string, unknown>, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

const bitsOf = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

Deno.test("an F32 round trip is bit-exact, including NaN, infinities, -0 and subnormals", () => {
  const special = new Float32Array([NaN, Infinity, -Infinity, -0, 1e-45, 3.4e38, Math.PI]);
  new Uint32Array(special.buffer)[0] = 0x7fc01234; // a NaN payload must survive too
  const random = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i * 12.9898) * 43758.5453);
  const tensors = new Map<string, Tensor>([
    ["special", { shape: [7], data: special }],
    ["random", { shape: [10, 10, 10], data: random }],
    ["scalar", { shape: [], data: new Float32Array([2.5]) }],
    ["empty", { shape: [0, 3], data: new Float32Array(0) }],
  ]);
  const bytes = writeSafetensors(tensors, { metadata: { format: "pt", note: "hi" } });
  const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal(headerLength % 8, 0);
  const back = readSafetensors(bytes);
  assert.deepEqual(back.metadata, { format: "pt", note: "hi" });
  assert.deepEqual([...back.tensors.keys()], ["special", "random", "scalar", "empty"]);
  for (const [name, t] of tensors) {
    assert.deepEqual(back.tensors.get(name)!.shape, t.shape);
    assert.deepEqual(bitsOf(back.tensors.get(name)!.data), bitsOf(t.data));
    assert.equal(back.dtypes.get(name), "F32");
  }
  // Writing what was read gives the same bytes.
  assert.deepEqual(writeSafetensors(back.tensors, { metadata: back.metadata }), bytes);
});

Deno.test("a hand-built BF16 file reads back to the known floats", () => {
  // bf16 bits: 1.0 = 0x3F80, -2.0 = 0xC000, 0.15625 = 0x3E20, 3.0 = 0x4040, +inf = 0x7F80,
  // -0 = 0x8000
  const bits = new Uint16Array([0x3f80, 0xc000, 0x3e20, 0x4040, 0x7f80, 0x8000]);
  const file = handMade(
    { "x": { dtype: "BF16", shape: [2, 3], data_offsets: [0, 12] } },
    new Uint8Array(bits.buffer),
  );
  const t = readSafetensors(file).tensors.get("x")!;
  assert.deepEqual(t.shape, [2, 3]);
  assert.deepEqual(Array.from(t.data), [1, -2, 0.15625, 3, Infinity, -0]);
  assert.ok(Object.is(t.data[5], -0));
});

Deno.test("a hand-built F16 file reads back to the known floats", () => {
  // f16 bits: 1.0 = 0x3C00, -2.5 = 0xC100, 65504 = 0x7BFF, smallest subnormal 2^-24 = 0x0001,
  // NaN = 0x7E00
  const bits = new Uint16Array([0x3c00, 0xc100, 0x7bff, 0x0001, 0x7e00, 0x3555]);
  const file = handMade(
    { "__metadata__": { format: "pt" }, "h": { dtype: "F16", shape: [6], data_offsets: [0, 12] } },
    new Uint8Array(bits.buffer),
  );
  const t = readSafetensors(file).tensors.get("h")!;
  assert.deepEqual(Array.from(t.data.subarray(0, 4)), [1, -2.5, 65504, 2 ** -24]);
  assert.ok(Number.isNaN(t.data[4]));
  assert.equal(t.data[5], f16ToF32(0x3555));
  assert.ok(Math.abs(t.data[5] - 1 / 3) < 1e-3);
});

Deno.test("BF16 writing rounds to nearest even and reads back within bf16 precision", () => {
  const x = new Float32Array([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.14159, 1e-3, NaN]);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1); 1 + 3·2^-8 rounds up to 1 + 2^-6.
  assert.deepEqual(Array.from(f32ToBf16Bits(x).subarray(0, 3)), [0x3f80, 0x3f80, 0x3f82]);
  const bytes = writeSafetensors(new Map([["x", { shape: [6], data: x }]]), { dtype: "BF16" });
  const back = readSafetensors(bytes);
  assert.equal(back.dtypes.get("x"), "BF16");
  const y = back.tensors.get("x")!.data;
  for (let i = 0; i < 5; i++) assert.ok(Math.abs(y[i] - x[i]) <= Math.abs(x[i]) * 2 ** -8);
  assert.ok(Number.isNaN(y[5]));
});

Deno.test("malformed files are rejected with clear errors", () => {
  assert.throws(() => readSafetensors(new Uint8Array(4)), /at least 8 bytes/);
  const huge = new Uint8Array(16);
  new DataView(huge.buffer).setBigUint64(0, 1000n, true);
  assert.throws(() => readSafetensors(huge), /header length must fit/);
  const data = new Uint8Array(8);
  assert.throws(
    () =>
      readSafetensors(handMade({ a: { dtype: "I64", shape: [1], data_offsets: [0, 8] } }, data)),
    /dtype must be F32, F16 or BF16: current value is I64/,
  );
  assert.throws(
    () =>
      readSafetensors(handMade({ a: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }, data)),
    /data_offsets must span 12 bytes/,
  );
  assert.throws(
    () =>
      readSafetensors(handMade({
        a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
        b: { dtype: "F32", shape: [1], data_offsets: [4, 8] },
      }, data)),
    /must not overlap/,
  );
  assert.throws(
    () => writeSafetensors(new Map([["a", { shape: [2, 2], data: new Float32Array(3) }]])),
    SafetensorsError,
  );
});

Deno.test("a sharded checkpoint is read through its index", async () => {
  const a = writeSafetensors(new Map([["x", { shape: [2], data: new Float32Array([1, 2]) }]]));
  const b = writeSafetensors(
    new Map([
      ["y", { shape: [1], data: new Float32Array([3]) }],
      ["z", { shape: [1, 1], data: new Float32Array([4]) }],
    ]),
  );
  const files: Record<string, Uint8Array> = {
    "m-00001-of-00002.safetensors": a,
    "m-00002-of-00002.safetensors": b,
  };
  const index = parseShardIndex(new TextEncoder().encode(JSON.stringify({
    metadata: { total_size: 16 },
    weight_map: {
      x: "m-00001-of-00002.safetensors",
      y: "m-00002-of-00002.safetensors",
      z: "m-00002-of-00002.safetensors",
    },
  })));
  const reads: string[] = [];
  const merged = await readShardedSafetensors(index, (name) => {
    reads.push(name);
    return Promise.resolve(files[name] ?? null);
  });
  assert.deepEqual(reads.sort(), Object.keys(files).sort());
  assert.deepEqual(Array.from(merged.tensors.get("x")!.data), [1, 2]);
  assert.deepEqual(merged.tensors.get("z")!.shape, [1, 1]);
  await assert.rejects(
    () =>
      readShardedSafetensors(
        { weight_map: { x: "gone.safetensors" } },
        () => Promise.resolve(null),
      ),
    /shard gone.safetensors as it must exist/,
  );
  assert.throws(
    () =>
      parseShardIndex(new TextEncoder().encode(JSON.stringify({ weight_map: { x: "../etc" } }))),
    /plain file names/,
  );
});

Deno.test("F16/BF16 decoding and BF16 rounding match torch bit for bit (skipped without torch)", async (t) => {
  const probe = new Deno.Command("/usr/bin/python3", {
    args: ["-c", "import torch"],
    stderr: "null",
  });
  if (!(await probe.output().then((o) => o.success, () => false))) {
    await t.step({ name: "torch is not installed", ignore: true, fn: () => {} });
    return;
  }
  const script = `
import json, torch
torch.manual_seed(0)
x = torch.cat([torch.randn(2000) * 10.0 ** torch.randint(-8, 8, (2000,)).float(),
               torch.tensor([0.0, -0.0, 65504.0, 1e-7, 3.0e38, float("inf")])])
h = x.to(torch.float16)
b = x.to(torch.bfloat16)
print(json.dumps({
  "x": x.view(torch.int32).tolist(),
  "h_bits": h.view(torch.int16).tolist(), "h_vals": h.float().view(torch.int32).tolist(),
  "b_bits": b.view(torch.int16).tolist(), "b_vals": b.float().view(torch.int32).tolist(),
}))
`;
  const out = await new Deno.Command("/usr/bin/python3", { args: ["-c", script], stdout: "piped" })
    .output();
  const ref = JSON.parse(new TextDecoder().decode(out.stdout));
  const u16 = (xs: number[]) => Uint16Array.from(xs, (v) => v & 0xffff);
  const u32 = (xs: number[]) => Array.from(Uint32Array.from(xs, (v) => v >>> 0));
  const x = new Float32Array(Uint32Array.from(ref.x, (v: number) => v >>> 0).buffer);
  assert.deepEqual(Array.from(f32ToBf16Bits(x)), Array.from(u16(ref.b_bits)));
  for (
    const [dtype, bits, vals] of [["F16", ref.h_bits, ref.h_vals], ["BF16", ref.b_bits, ref.b_vals]]
  ) {
    const raw = u16(bits);
    const file = handMade(
      { t: { dtype, shape: [raw.length], data_offsets: [0, raw.byteLength] } },
      new Uint8Array(raw.buffer),
    );
    assert.deepEqual(bitsOf(readSafetensors(file).tensors.get("t")!.data), u32(vals), dtype);
  }
});
