/**
 * Independent check of the decoder against a PyTorch implementation with Hugging Face's
 * parameter names (bench/engine_torch.py --logits, float64). Skipped when /usr/bin/python3 has
 * no torch (`apt-get install -y python3-torch`).
 */
import assert from "node:assert/strict";
import { Policy } from "../../../workers/model/policy.ts";
import { parameterSpecs } from "../../../workers/model/config.ts";
import { randomParameters, TINY_LLAMA, TINY_LLAMA3, TINY_QWEN, TINY_QWEN3 } from "./_tiny.ts";
import { type LoraConfig, loraParameterSpecs, saveAdapter } from "../../../workers/model/lora.ts";
import { writeHfFolder } from "../../../workers/model/hf.ts";
import { lcg } from "../engine/_gradcheck.ts";

const PYTHON = "/usr/bin/python3";
const hasTorch = await new Deno.Command(PYTHON, {
  args: ["-c", "import torch"],
  stdout: "null",
  stderr: "null",
})
  .output()
  .then((o) => o.success)
  .catch(() => false);

const IDS = [[1, 5, 9, 3, 3, 7, 10, 4], [1, 4, 8, 8, 2, 6, 6, 9]];

for (const c of [TINY_LLAMA, TINY_QWEN, TINY_QWEN3, TINY_LLAMA3]) {
  const variant = c.rope_scaling ? " with Llama 3 RoPE scaling" : "";
  Deno.test({
    name:
      `log-probs match an independent PyTorch decoder with HF names (${c.architecture}${variant})`,
    ignore: !hasTorch,
    fn: async () => {
      const params = randomParameters(c, 6);
      const child = new Deno.Command(PYTHON, {
        args: [new URL("../../../bench/engine_torch.py", import.meta.url).pathname, "--logits"],
        stdin: "piped",
        stdout: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      const spec = {
        config: c,
        params: Object.fromEntries(
          parameterSpecs(c).map((s) => [s.name, Array.from(params.get(s.name)!)]),
        ),
        ids: IDS,
      };
      await w.write(new TextEncoder().encode(JSON.stringify(spec)));
      await w.close();
      const out = await child.output();
      assert.ok(out.success);
      const logits = JSON.parse(new TextDecoder().decode(out.stdout)) as number[][][]; // (B, T, V)
      const policy = new Policy(c, params);
      const scored = await policy.score(
        IDS.map((row) => ({ prompt: [row[0]], response: row.slice(1) })),
      );
      let maxDiff = 0;
      IDS.forEach((row, b) => {
        for (let t = 0; t + 1 < row.length; t++) {
          const l = logits[b][t], m = Math.max(...l);
          const lse = m + Math.log(l.reduce((s, x) => s + Math.exp(x - m), 0));
          maxDiff = Math.max(maxDiff, Math.abs(scored.logprobs[b][t] - (l[row[t + 1]] - lse)));
        }
      });
      // float32 ONNX against a float64 reference: differences are float32 rounding (≈ 1e-6).
      assert.ok(maxDiff < 1e-5, `max abs log-prob diff ${maxDiff}`);
      await policy.release();
    },
  });
}

Deno.test({
  name:
    "a LoRA policy's log-probs match PyTorch applying the saved PEFT adapter files to the base (Qwen2)",
  ignore: !hasTorch,
  fn: async () => {
    const c = TINY_QWEN;
    const lora: LoraConfig = {
      rank: 3,
      alpha: 5,
      dropout: 0.1, // training only: scoring ignores it, as PEFT's eval mode does
      target_modules: ["q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"],
    };
    const params = randomParameters(c, 6);
    const rnd = lcg(8);
    for (const s of loraParameterSpecs(c, lora)) {
      params.set(s.name, Float32Array.from({ length: s.shape[0] * s.shape[1] }, () => rnd() - 0.5));
    }
    const dir = await Deno.makeTempDir();
    try {
      await writeHfFolder(dir, saveAdapter(c, lora, params, "tiny-qwen"));
      const child = new Deno.Command(PYTHON, {
        args: [new URL("../../../bench/engine_torch.py", import.meta.url).pathname, "--logits"],
        stdin: "piped",
        stdout: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      const spec = {
        config: c,
        params: Object.fromEntries(
          parameterSpecs(c).map((s) => [s.name, Array.from(params.get(s.name)!)]),
        ),
        ids: IDS,
        adapter: dir,
      };
      await w.write(new TextEncoder().encode(JSON.stringify(spec)));
      await w.close();
      const out = await child.output();
      assert.ok(out.success);
      const logits = JSON.parse(new TextDecoder().decode(out.stdout)) as number[][][]; // (B, T, V)
      const rows = IDS.map((row) => ({ prompt: [row[0]], response: row.slice(1) }));
      const policy = new Policy(c, params, { lora });
      const base = new Policy(c, params, { sessions: policy.sessions });
      const [scored, plain] = [await policy.score(rows), await base.score(rows)];
      let maxDiff = 0, moved = 0;
      IDS.forEach((row, b) => {
        for (let t = 0; t + 1 < row.length; t++) {
          const l = logits[b][t], m = Math.max(...l);
          const lse = m + Math.log(l.reduce((s, x) => s + Math.exp(x - m), 0));
          const ref = l[row[t + 1]] - lse;
          maxDiff = Math.max(maxDiff, Math.abs(scored.logprobs[b][t] - ref));
          moved = Math.max(moved, Math.abs(plain.logprobs[b][t] - ref));
        }
      });
      assert.ok(maxDiff < 1e-5, `max abs log-prob diff ${maxDiff}`);
      assert.ok(moved > 1e-2, `the adapter matters: the base is ${moved} away`);
      await policy.release();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
