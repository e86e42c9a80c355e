/**
 * Independent check of the image encoder against PyTorch (tests/workers/model/_siglip_torch.py:
 * a stride-p Conv2d patch embedding, PIL-style nearest resize, LayerNorm, tanh-GELU, with HF
 * parameter names). Skipped when /usr/bin/python3 has no torch.
 */
import assert from "node:assert/strict";
import { Policy } from "../../../workers/model/policy.ts";
import { parameterSpecs } from "../../../workers/model/config.ts";
import { createBuiltinTinyVl } from "../../../workers/model/init.ts";
import { randomImage, randomParameters, TINY_VL } from "./_tiny.ts";

const PYTHON = "/usr/bin/python3";
const hasTorch = await new Deno.Command(PYTHON, {
  args: ["-c", "import torch"],
  stdout: "null",
  stderr: "null",
})
  .output()
  .then((o) => o.success)
  .catch(() => false);

const TINY_VL_BUILTIN = createBuiltinTinyVl({ vocabulary: ["red"], seed: 2 });

for (
  const [label, config, params] of [
    ["TINY_VL, random parameters", TINY_VL, randomParameters(TINY_VL, 9, 0.8)],
    ["builtin:tiny-vl", TINY_VL_BUILTIN.config, TINY_VL_BUILTIN.parameters],
  ] as const
) {
  Deno.test({
    name:
      `image embeddings match an independent PyTorch SigLIP tower and LLaVA projector (${label})`,
    ignore: !hasTorch,
    fn: async () => {
      const images = [randomImage(8, 8, 1), randomImage(13, 5, 2), randomImage(50, 61, 3)];
      const child = new Deno.Command(PYTHON, {
        args: [new URL("./_siglip_torch.py", import.meta.url).pathname],
        stdin: "piped",
        stdout: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(JSON.stringify({
        config,
        params: Object.fromEntries(
          parameterSpecs(config).map((s) => [s.name, Array.from(params.get(s.name)!)]),
        ),
        images: images.map((img) => ({ ...img, rgb: Array.from(img.rgb) })),
      })));
      await w.close();
      const out = await child.output();
      assert.ok(out.success);
      const expected = (JSON.parse(new TextDecoder().decode(out.stdout)) as number[][]).flat();
      const policy = new Policy(config, params);
      const got = await policy.encodeImages(images);
      assert.equal(got.length, expected.length);
      const scale = Math.max(...expected.map(Math.abs));
      const maxDiff = expected.reduce((m, x, i) => Math.max(m, Math.abs(x - got[i])), 0);
      assert.ok(maxDiff / scale < 1e-5, `max abs diff ${maxDiff} (scale ${scale})`);
      await policy.release();
    },
  });
}
