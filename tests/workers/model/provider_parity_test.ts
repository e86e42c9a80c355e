/**
 * The model's train, score and decode graphs on `SEED_TEST_EXECUTION_PROVIDER` (a GPU provider,
 * set by bench/tools/gpu_check.sh) against the same graphs on the CPU, float32 both. Ignored when
 * the variable is unset; `SEED_TEST_EXECUTION_PROVIDER=cpu` runs it CPU against CPU.
 */
import assert from "node:assert/strict";
import type { DecoderConfig } from "../../../workers/model/config.ts";
import { initParameters } from "../../../workers/model/init.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import { Policy } from "../../../workers/model/policy.ts";
import type { Sample } from "../../../workers/model/batch.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { TEST_EP, TEST_EP_SET } from "../engine/_provider.ts";

/** Llama-style with GQA, large enough that every kernel does real work on a GPU. */
const CONFIG: DecoderConfig = {
  architecture: "LlamaForCausalLM",
  vocab_size: 320,
  hidden_size: 96,
  intermediate_size: 256,
  num_hidden_layers: 2,
  num_attention_heads: 6,
  num_key_value_heads: 2,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 256,
  tie_word_embeddings: true,
  attention_bias: false,
  bos_token_id: 1,
  eos_token_id: 2,
  pad_token_id: 0,
};

const rnd = lcg(11);
const token = () => 3 + Math.floor(rnd() * (CONFIG.vocab_size - 3));
const tokens = (n: number) => Array.from({ length: n }, token);
// Ragged prompts and responses, so padding and the token index are exercised too.
const SAMPLES: Sample[] = [[5, 9], [12, 4], [3, 17], [20, 6]].map(([p, r]) => ({
  prompt: tokens(p),
  response: tokens(r),
}));

/** Largest |a − b| over two lists of arrays of the same shapes. */
function maxAbsDiff(a: ArrayLike<number>[], b: ArrayLike<number>[]): number {
  let worst = 0;
  a.forEach((x, i) => {
    assert.equal(x.length, b[i].length);
    for (let k = 0; k < x.length; k++) worst = Math.max(worst, Math.abs(x[k] - b[i][k]));
  });
  return worst;
}

Deno.test({
  name: `train, score and decode graphs on ${TEST_EP} match the CPU in float32`,
  ignore: !TEST_EP_SET,
  async fn(t) {
    // std 0.2 (not HF's 0.02) so that distributions are peaked and greedy choices clear.
    const params = initParameters(CONFIG, 5, { std: 0.2 });
    const cpu = new Policy(CONFIG, params, { ep: "cpu", threads: 2 });
    const dev = new Policy(CONFIG, params, { ep: TEST_EP, threads: 2 });
    try {
      await t.step("score: per-token log-probs within 2e-3", async () => {
        const [a, b] = [await cpu.score(SAMPLES), await dev.score(SAMPLES)];
        const err = maxAbsDiff(a.logprobs, b.logprobs);
        assert.ok(err <= 2e-3, `max |Δ log-prob| ${err}`);
        assert.ok(maxAbsDiff(a.entropy, b.entropy) <= 2e-3);
      });

      await t.step(
        "train: loss within 1e-4 relative, each gradient within 1e-3 of its scale",
        async () => {
          const [a, b] = [
            await cpu.trainStep(TOKEN_NLL, SAMPLES),
            await dev.trainStep(TOKEN_NLL, SAMPLES),
          ];
          const loss = [a.outputs.loss, b.outputs.loss];
          assert.ok(Math.abs(loss[0] - loss[1]) <= 1e-4 * Math.abs(loss[0]), `loss ${loss}`);
          for (const [name, g] of a.grads) {
            const scale = Math.max(...g.map(Math.abs));
            const err = maxAbsDiff([g], [b.grads.get(name)!]);
            assert.ok(err <= 1e-3 * scale + 1e-7, `${name}: max |Δ| ${err} at scale ${scale}`);
          }
        },
      );

      await t.step("decode: greedy tokens agree, or part at a tie the CPU also sees", async () => {
        const prompts = SAMPLES.map((s) => s.prompt);
        const opts = { maxNewTokens: 12, greedy: true, eosTokenIds: [], maxBatch: 8 };
        const [a, b] = [await cpu.generate(prompts, opts), await dev.generate(prompts, opts)];
        for (let i = 0; i < prompts.length; i++) {
          const k = a[i].tokens.findIndex((tok, j) => tok !== b[i].tokens[j]);
          if (k < 0) continue;
          // First difference: both tokens must be (near-)equally likely under the CPU.
          const prefix = a[i].tokens.slice(0, k);
          const lp = (await cpu.score([
            { prompt: prompts[i], response: [...prefix, a[i].tokens[k]] },
            { prompt: prompts[i], response: [...prefix, b[i].tokens[k]] },
          ])).logprobs.map((l) => l[k]);
          assert.ok(Math.abs(lp[0] - lp[1]) <= 2e-3, `row ${i} token ${k}: log-probs ${lp}`);
        }
      });
    } finally {
      await cpu.release();
      await dev.release();
    }
  },
});
