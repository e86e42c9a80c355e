import assert from "node:assert/strict";
import { parseJobSpec } from "../../../jobs/mod.ts";
import { Tokenizer } from "../../../workers/model/mod.ts";
import { TextPolicy } from "../../../workers/seed/mod.ts";
import { testTrainer, tinySokobanPolicy, tinySpec } from "./_jobs.ts";

/** One trainer step from the same init; returns the step's metrics and the updated weights. */
async function stepWith(seed: Record<string, unknown>) {
  const { env, model, policy } = await tinySokobanPolicy();
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer));
  const spec = parseJobSpec(tinySpec({ seed: { analyzer_max_new_tokens: 24, ...seed } }));
  const trainer = testTrainer(spec, { env, theta });
  const { metrics } = await trainer.step(1, () => Promise.resolve());
  await policy.release();
  return { metrics, params: model.parameters };
}

Deno.test("analyzer replay adds the reference analyses' NLL to the update, and 0 turns it off", async () => {
  const on = await stepWith({ analyzer_replay_samples: 4, analyzer_replay_coef: 1 });
  const off = await stepWith({ analyzer_replay_samples: 4, analyzer_replay_coef: 0 });
  // An untrained model's NLL of a reference analysis is near ln(vocabulary) per token.
  assert.ok(on.metrics.analyzer_replay_loss > 3, `${on.metrics.analyzer_replay_loss}`);
  assert.equal(off.metrics.analyzer_replay_loss, 0);
  const name = "model.embed_tokens.weight";
  const a = on.params.get(name)!, b = off.params.get(name)!;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i] - b[i]));
  assert.ok(diff > 0, "the replay gradient changed nothing");
});
