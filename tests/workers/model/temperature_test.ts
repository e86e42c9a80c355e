/**
 * Every scoring pass at a temperature T ≠ 1 gives log-probs and entropies of softmax(logits / T),
 * the rollout distribution (the reference code's actor: `logits.div_(temperature)` before each
 * log-prob and entropy, verl `dp_actor.py` `_forward_micro_batch` at 2cf2fad), checked against a
 * float64 hand computation on the decode graph's logits.
 */
import assert from "node:assert/strict";
import { Policy, TOKEN_NLL } from "../../../workers/model/mod.ts";
import { SEED_OBJECTIVE } from "../../../workers/seed/objective.ts";
import { randomParameters, TINY_LLAMA } from "./_tiny.ts";
import { decoders } from "./_decode.ts";
import { SPEC_COEFFICIENTS } from "../seed/_objective_oracle.ts";

const T = 0.6;
const SAMPLES = [
  { prompt: [1, 5, 9, 3], response: [7, 7, 2] },
  { prompt: [1, 5, 9, 4, 4], response: [8, 10, 6, 5] },
];

/** log softmax(z / t) at `id` and the entropy of softmax(z / t), in float64, for one row z. */
function byHand(z: ArrayLike<number>, id: number, t: number) {
  const s = Array.from(z, (x) => x / t);
  const m = Math.max(...s);
  const lse = m + Math.log(s.reduce((n, x) => n + Math.exp(x - m), 0));
  const logp = s.map((x) => x - lse);
  return { logp: logp[id], entropy: -logp.reduce((n, l) => n + Math.exp(l) * l, 0) };
}

/** Per response token of each sample: the hand log-prob and entropy at temperature t. */
async function expected(policy: Policy, t: number) {
  const { step, release } = await decoders(policy);
  const v = TINY_LLAMA.vocab_size;
  const out = [];
  for (const s of SAMPLES) {
    const { logits } = await step(null, [...s.prompt, ...s.response], 0); // (T, V)
    // response token k is predicted at position |prompt| − 1 + k
    out.push(s.response.map((id, k) => {
      const row = s.prompt.length - 1 + k;
      return byHand(logits.subarray(row * v, (row + 1) * v), id, t);
    }));
  }
  await release();
  return out;
}

function close(a: ArrayLike<number>, b: number[], what: string, tol = 1e-4) {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < b.length; i++) {
    assert.ok(Math.abs(a[i] - b[i]) < tol, `${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}

Deno.test("score, shared-prefix score and train step at T = 0.6 give log softmax(logits / T) and its entropy", async () => {
  const params = randomParameters(TINY_LLAMA, 9);
  // sharper logits, so the temperature shows
  params.set(
    "model.embed_tokens.weight",
    params.get("model.embed_tokens.weight")!.map((x) => 4 * x),
  );
  const policy = new Policy(TINY_LLAMA, params);
  const want = await expected(policy, T);
  const atOne = await expected(policy, 1);
  const gap = Math.max(...want.flat().map((w, i) => Math.abs(w.logp - atOne.flat()[i].logp)));
  assert.ok(gap > 0.05, `T must matter for this model: max |Δℓ| ${gap}`);

  const scored = await policy.score(SAMPLES, { temperature: T });
  const shared = await policy.scoreSharedPrefixes(SAMPLES, [[0, 1]], { temperature: T });
  const plain = await policy.score(SAMPLES);
  SAMPLES.forEach((_, i) => {
    const lp = want[i].map((w) => w.logp), h = want[i].map((w) => w.entropy);
    close(scored.logprobs[i], lp, `score ℓ ${i}`);
    close(scored.entropy[i], h, `score H ${i}`);
    close(shared.logprobs[i], lp, `shared-prefix ℓ ${i}`);
    close(shared.entropy[i], h, `shared-prefix H ${i}`);
    close(plain.logprobs[i], atOne[i].map((w) => w.logp), `score ℓ at T = 1, ${i}`);
  });

  // The update's ℓθ (TOKEN_NLL: loss = −mean ℓ) and H (the SEED objective's entropy output).
  const nll = await policy.trainStep(TOKEN_NLL, SAMPLES, {}, { temperature: T });
  SAMPLES.forEach((_, i) => close(nll.logprobs[i], want[i].map((w) => w.logp), `train ℓ ${i}`));
  const all = want.flat();
  assert.ok(Math.abs(nll.outputs.loss + all.reduce((n, w) => n + w.logp, 0) / all.length) < 1e-4);
  const rl = SAMPLES.map((s) => ({
    ...s,
    inputs: {
      advantages: 0,
      old_logprobs: 0,
      teacher_logprobs: 0,
      ref_logprobs: 0,
      opd_mask: 0,
    },
  }));
  const seed = await policy.trainStep(SEED_OBJECTIVE, rl, SPEC_COEFFICIENTS, { temperature: T });
  const meanH = all.reduce((n, w) => n + w.entropy, 0) / all.length;
  assert.ok(Math.abs(seed.outputs.entropy - meanH) < 1e-4, `${seed.outputs.entropy} vs ${meanH}`);
  await assert.rejects(() => policy.score(SAMPLES, { temperature: 0 }), /finite number > 0/);
  await policy.release();
});
