import assert from "node:assert/strict";
import {
  buildByteLevelTokenizer,
  builtinTinyConfig,
  configFromJson,
  configToJson,
  createBuiltinTinyVl,
  HfFormatError,
  InitError,
  initParameters,
  parameterCount,
  parameterSpecs,
  Tokenizer,
  visionParameterSpecs,
} from "../../../workers/model/mod.ts";
import { TINY_VL } from "./_tiny.ts";

Deno.test("builtin:tiny-vl adds a 106,560-parameter encoder and projector to builtin:tiny", () => {
  const model = createBuiltinTinyVl({ vocabulary: ["red", "blue"], seed: 1 });
  const c = model.config, v = c.vision_config!;
  assert.equal(parameterCount(c), 844_992 + 128 * c.vocab_size);
  assert.equal(parameterCount(c) - parameterCount(builtinTinyConfig(c.vocab_size)), 106_560);
  assert.equal(v.image_size / v.patch_size, 6);
  const big = createBuiltinTinyVl({ vocabulary: ["red"], seed: 1, imageSize: 64 }).config;
  assert.equal(
    parameterCount(big) - parameterCount(c),
    64 * (64 - 36) + 128 * (big.vocab_size - c.vocab_size),
  );
  assert.throws(
    () => createBuiltinTinyVl({ vocabulary: ["red"], seed: 1, imageSize: 50 }),
    (e: Error) =>
      e instanceof InitError &&
      /imageSize must be a positive multiple of the patch size 8: current value is 50/.test(
        e.message,
      ),
  );
});

Deno.test("vision parameters initialise as transformers does: unit LayerNorm gains, zero biases, N(0, 0.02) matrices", () => {
  const p = initParameters(TINY_VL, 4);
  assert.deepEqual([...p.keys()], parameterSpecs(TINY_VL).map((s) => s.name));
  assert.ok(p.get("vision_tower.encoder.layers.1.layer_norm2.weight")!.every((x) => x === 1));
  assert.ok(p.get("vision_tower.post_layernorm.weight")!.every((x) => x === 1));
  assert.ok(p.get("vision_tower.post_layernorm.bias")!.every((x) => x === 0));
  assert.ok(p.get("multi_modal_projector.linear_2.bias")!.every((x) => x === 0));
  const kernel = p.get("vision_tower.embeddings.patch_embedding.weight")!;
  assert.equal(kernel.length, 8 * 3 * 4 * 4);
  const std = Math.sqrt(kernel.reduce((s, x) => s + x * x, 0) / kernel.length);
  assert.ok(Math.abs(std - 0.02) < 3e-3, `std ${std}`);
  assert.deepEqual(
    visionParameterSpecs(TINY_VL).find((s) => s.name.endsWith("position_embedding.weight"))!.shape,
    [4, 8],
  );
});

Deno.test("config.json carries the vision config, image token and projector activation both ways", () => {
  const json = configToJson(TINY_VL);
  assert.equal((json.vision_config as Record<string, unknown>).model_type, "siglip_vision_model");
  assert.equal(json.image_token_id, 10);
  assert.equal(json.projector_hidden_act, "gelu_pytorch_tanh");
  assert.deepEqual(configFromJson(json), TINY_VL);
  // SigLIP/LLaVA defaults: 3 channels, eps 1e-6, tanh GELU in the tower, exact GELU projector
  const vision = { ...(json.vision_config as Record<string, unknown>) };
  delete vision.num_channels;
  delete vision.layer_norm_eps;
  delete vision.hidden_act;
  const loaded = configFromJson({
    ...json,
    vision_config: vision,
    projector_hidden_act: undefined,
  });
  assert.equal(loaded.vision_config!.num_channels, 3);
  assert.equal(loaded.vision_config!.hidden_act, "gelu_pytorch_tanh");
  assert.equal(loaded.vision_config!.projector_hidden_act, "gelu");
  assert.throws(
    () => configFromJson({ ...json, vision_config: { ...vision, patch_size: 3 } }),
    (e: Error) =>
      e instanceof HfFormatError &&
      /^Cannot load config.json as vision_config.patch_size must divide image_size/.test(e.message),
  );
  assert.throws(
    () => configFromJson({ ...json, image_token_id: undefined }),
    /image_token_id must be a token id/,
  );
  assert.throws(
    () => configFromJson({ ...json, projector_hidden_act: "relu" }),
    /projector_hidden_act must be one of/,
  );
  assert.equal(configToJson(builtinTinyConfig(20)).vision_config, undefined);
});

Deno.test("extra special tokens of a builtin tokenizer get one id each after the builtin ones", () => {
  const plain = new Tokenizer(buildByteLevelTokenizer(["red"]));
  const extra = new Tokenizer(buildByteLevelTokenizer(["red"], { specialTokens: ["<image>"] }));
  assert.equal(extra.vocabSize, plain.vocabSize + 1);
  assert.deepEqual(extra.encode("red<image>red"), [
    ...plain.encode("red"),
    plain.vocabSize,
    ...plain.encode("red"),
  ]);
  assert.throws(
    () => buildByteLevelTokenizer(["red"], { specialTokens: ["<|im_end|>"] }),
    /special tokens must be non-empty and distinct/,
  );
});
