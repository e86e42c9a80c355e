import assert from "node:assert/strict";
import {
  AdamW,
  createBuiltinTiny,
  parameterSpecs,
  Policy,
  TOKEN_NLL,
  Tokenizer,
} from "../../../workers/model/mod.ts";

Deno.test("builtin:tiny learns prompt → action pairs and generation stops at the stop string", async () => {
  const words = [
    "go",
    "north",
    "south",
    "east",
    "west",
    "you",
    "see",
    "a",
    "wall",
    "door",
    "action",
  ];
  const model = createBuiltinTiny({ vocabulary: words, seed: 1 });
  const tok = new Tokenizer(model.tokenizer);
  const pairs = [["you see a wall", "<action>go south</action>"], [
    "you see a door",
    "<action>go north</action>",
  ]];
  const samples = pairs.map(([p, r]) => ({ prompt: tok.encode(p), response: tok.encode(r) }));
  const policy = new Policy(model.config, model.parameters);
  const opt = new AdamW(parameterSpecs(model.config), { lr: 3e-3, weightDecay: 0 });
  let loss = Infinity;
  for (let step = 0; step < 120 && loss > 0.02; step++) {
    const r = await policy.trainStep(TOKEN_NLL, samples);
    loss = r.outputs.loss;
    opt.step(model.parameters, r.grads);
  }
  assert.ok(loss < 0.02, `loss ${loss}`);
  const gens = await policy.generate(samples.map((s) => s.prompt), {
    maxNewTokens: 20,
    greedy: true,
    stop: ["</action>"],
    detokenize: (ids) => tok.decode(ids),
  });
  assert.deepEqual(gens.map((g) => g.text?.trim()), pairs.map(([, r]) => r));
  assert.ok(gens.every((g) => g.finishReason === "stop"));
  await policy.release();
});
