import assert from "node:assert/strict";
import { getEnvironment, toAsyncEnvironment } from "../../../workers/envs/mod.ts";
import { AdamW, clipGradNorm, Policy, TOKEN_NLL, Tokenizer } from "../../../workers/model/mod.ts";
import { sftTrain, TextPolicy } from "../../../workers/seed/mod.ts";
import { resolveModel } from "../../../workers/seed/run/mod.ts";

const env = toAsyncEnvironment(getEnvironment("sokoban"));

async function textPolicy(): Promise<TextPolicy> {
  const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
  return new TextPolicy(
    new Policy(model.config, model.parameters, { threads: 1 }),
    new Tokenizer(model.tokenizer),
  );
}

const params = (t: TextPolicy) => [...t.policy.params.values()].map((p) => p.slice());

Deno.test("a cosine SFT stage of 2 steps steps at lr, then lr/2: ½(1 + cos(π·k/2))", async () => {
  const [a, b, c] = [await textPolicy(), await textPolicy(), await textPolicy()];
  const lr = 1e-2;
  // One sample, batch 1, two epochs: both steps see the same batch in every run.
  const sample = (t: TextPolicy) => t.sample("push the box", "<action>up</action>");
  const options = { batchSize: 1, lr, maxGradNorm: 1, seed: 3 };
  const cosine = await sftTrain(a, [{ samples: [sample(a)], epochs: 2 }], {
    ...options,
    lrSchedule: "cosine",
  });
  await sftTrain(c, [{ samples: [sample(c)], epochs: 2 }], options);
  // By hand: the same steps at lr and lr/2.
  const adamw = new AdamW(b.policy.trainableSpecs(), { lr, weightDecay: 0 });
  for (const stepLr of [lr, lr / 2]) {
    const r = await b.policy.trainStep(TOKEN_NLL, [sample(b)], {});
    clipGradNorm(r.grads, 1);
    adamw.step(b.policy.params, r.grads, stepLr);
  }
  assert.equal(cosine.optimizerSteps, 2);
  assert.deepEqual(params(a), params(b));
  assert.notDeepEqual(params(c), params(b), "the constant schedule's second step differs");
  for (const t of [a, b, c]) await t.policy.release();
});

Deno.test("an SFT check runs after every `every`-th step but the last, and stops the stage when it says so", async () => {
  const text = await textPolicy();
  const samples = [
    text.sample("a", "<action>up</action>"),
    text.sample("b", "<action>down</action>"),
  ];
  const seen: [number, number][] = [];
  const all = await sftTrain(text, [{ samples, epochs: 3 }], {
    batchSize: 1,
    lr: 1e-3,
    maxGradNorm: 1,
    seed: 1,
    check: { every: 2, run: (done, total) => (seen.push([done, total]), Promise.resolve(false)) },
  });
  assert.equal(all.optimizerSteps, 6);
  assert.equal(all.stoppedEarly, false);
  assert.deepEqual(seen, [[2, 6], [4, 6]]);
  const stopped = await sftTrain(text, [{ samples, epochs: 3 }], {
    batchSize: 1,
    lr: 1e-3,
    maxGradNorm: 1,
    seed: 1,
    check: { every: 2, run: (done) => Promise.resolve(done === 4) },
  });
  assert.equal(stopped.optimizerSteps, 4);
  assert.equal(stopped.stoppedEarly, true);
  await text.policy.release();
});
