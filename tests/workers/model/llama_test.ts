import assert from "node:assert/strict";
import { createSession, tensor } from "../../../workers/engine/mod.ts";
import { type DecoderConfig, parameterSpecs } from "../../../workers/model/config.ts";
import {
  buildDecodeGraph,
  buildScoreGraph,
  buildTrainGraph,
  DecoderConfigError,
} from "../../../workers/model/llama.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import { SEED_OBJECTIVE, type SeedCoefficients } from "../../../workers/seed/objective.ts";
import { packSamples, packTokens, type Sample } from "../../../workers/model/batch.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { SPEC_COEFFICIENTS } from "../seed/_objective_oracle.ts";
import { randomParameters, TINY_LLAMA, TINY_LLAMA3, TINY_QWEN, TINY_QWEN3 } from "./_tiny.ts";

const SAMPLES: Sample[] = [
  { prompt: [1, 5, 5, 7], response: [3, 9, 2] },
  { prompt: [1, 4], response: [6, 6, 10, 8, 2] },
];

/**
 * Whole-model check in float64: d loss / d θ from the train graph against central differences
 * on the largest-gradient coordinate and 3 random coordinates of every parameter.
 */
async function checkModel(c: DecoderConfig, coefs?: SeedCoefficients, temperature?: number) {
  const bucket = { batch: 2, length: 8, tokens: 16 }; // 8 scored tokens + 8 unused slots
  const objective = coefs ? SEED_OBJECTIVE : TOKEN_NLL;
  const g = buildTrainGraph(c, bucket, { objective, dtype: "float64", temperature });
  const session = await createSession(g.toModel());
  const packed = packSamples(SAMPLES, bucket, 0);
  const dims = [2, 8], rDims = [16];
  const rnd = lcg(11);
  const perToken = (f: () => number) =>
    tensor(
      "float64",
      Float64Array.from(
        packTokens(packed, SAMPLES.map((s) => Array.from({ length: s.response.length }, f))),
      ),
      rDims,
    );
  const feeds: Record<string, ReturnType<typeof tensor>> = {
    input_ids: tensor("int64", packed.inputIds, dims),
    position_ids: tensor("int64", packed.positionIds, dims),
    token_index: tensor("int64", packed.tokenIndex, rDims),
    targets: tensor("int64", packed.targets, rDims),
    attention_mask: tensor("float64", Float64Array.from(packed.attentionMask), dims),
    loss_mask: tensor("float64", Float64Array.from(packed.lossMask), rDims),
    // counts are per-token divisors (R,): every token of this one-micro-batch step divides by 8
    response_tokens: tensor("float64", new Float64Array(16).fill(8), rDims),
  };
  if (coefs) {
    // advantages of both signs; old log-probs spread so ratios fall inside and outside the clip
    feeds.advantages = perToken(() => (rnd() < 0.5 ? -1 : 1) * (0.5 + rnd()));
    feeds.old_logprobs = perToken(() => -2.4 + (rnd() - 0.5) * 1.2);
    feeds.teacher_logprobs = perToken(() => -3 * rnd());
    feeds.ref_logprobs = perToken(() => -2.4 + (rnd() - 0.5));
    feeds.opd_mask = tensor("float64", Float64Array.from(packTokens(packed, [1, 0])), rDims);
    feeds.teacher_tokens = tensor(
      "float64",
      new Float64Array(16).fill(SAMPLES[0].response.length),
      rDims,
    );
    for (const [n, v] of Object.entries(coefs)) {
      feeds[n] = tensor("float64", Float64Array.of(v), []);
    }
  }
  const params: Map<string, Float64Array> = new Map(
    [...randomParameters(c, 5)].map(([k, v]) => [k, Float64Array.from(v)]),
  );
  const run = async () => {
    for (const s of parameterSpecs(c)) {
      feeds[s.name] = tensor("float64", params.get(s.name)!, s.shape);
    }
    return await session.run(feeds);
  };
  const base = await run();
  const eps = 1e-6;
  let worst = 0, where = "", checked = 0;
  for (const s of parameterSpecs(c)) {
    const grad = base[`grad.${s.name}`].data as Float64Array;
    let big = 0;
    for (let i = 1; i < grad.length; i++) if (Math.abs(grad[i]) > Math.abs(grad[big])) big = i;
    for (const i of [big, ...Array.from({ length: 3 }, () => Math.floor(rnd() * grad.length))]) {
      const p = params.get(s.name)!, old = p[i];
      p[i] = old + eps;
      const lp = Number((await run()).loss.data[0]);
      p[i] = old - eps;
      const lm = Number((await run()).loss.data[0]);
      p[i] = old;
      const fd = (lp - lm) / (2 * eps);
      const scale = Math.max(Math.abs(fd), Math.abs(grad[i]));
      if (scale < 1e-6) continue;
      checked++;
      const rel = Math.abs(fd - grad[i]) / scale;
      if (rel > worst) (worst = rel), (where = `${s.name}[${i}] fd=${fd} analytic=${grad[i]}`);
    }
  }
  await session.release();
  assert.ok(checked >= parameterSpecs(c).length, `too few coordinates checked: ${checked}`);
  assert.ok(worst < 1e-5, `max rel err ${worst} at ${where}`);
}

Deno.test("the SFT train graph's gradients match float64 finite differences (Llama: GQA, tied)", async () => {
  await checkModel(TINY_LLAMA);
});

Deno.test("the SFT train graph's gradients match float64 finite differences (Qwen2: bias, untied)", async () => {
  await checkModel(TINY_QWEN);
});

Deno.test("the SFT train graph's gradients match float64 finite differences (Qwen3: q/k norms, head_dim ≠ C/H)", async () => {
  await checkModel(TINY_QWEN3);
});

Deno.test("the SFT train graph's gradients match float64 finite differences (Llama 3 RoPE scaling)", async () => {
  await checkModel(TINY_LLAMA3);
});

Deno.test("the SEED train graph's gradients match float64 finite differences (β = 0 makes the gate constant)", async () => {
  // With β = 0 the stop-gradient gate is σ(0), so the loss FD sees is the loss autodiff
  // differentiates. Temperature 0.7: ℓθ and H of softmax(logits / 0.7).
  await checkModel(TINY_LLAMA, {
    ...SPEC_COEFFICIENTS,
    clip_ratio_low: 0.2,
    clip_ratio_high: 0.28,
    dual_clip: 3,
    gate_beta: 0,
    opd_coef: 0.5,
    kl_coef: 0.3,
    entropy_coef: 0.1,
  }, 0.7);
});

Deno.test("a config whose query heads do not group over its KV heads fails at build time", () => {
  const bad: DecoderConfig = { ...TINY_LLAMA, num_key_value_heads: 3 };
  assert.throws(
    () => buildTrainGraph(bad, { batch: 1, length: 4, tokens: 8 }, { objective: TOKEN_NLL }),
    (e: Error) =>
      e instanceof DecoderConfigError && /multiple of num_key_value_heads/.test(e.message),
  );
});

Deno.test("a left-padded row scores the same log-probs as a right-padded one", async () => {
  const c = TINY_QWEN, t = 8;
  const session = await createSession(
    buildScoreGraph(c, { batch: 2, length: t, tokens: 16 }).toModel(),
  );
  const params = randomParameters(c, 7);
  const s = SAMPLES[0], row = [...s.prompt, ...s.response], n = row.length - 1; // 6 positions
  const ids = new BigInt64Array(2 * t), pos = new BigInt64Array(2 * t);
  const mask = new Float32Array(2 * t);
  const index = new BigInt64Array(16), targets = new BigInt64Array(16);
  for (let j = 0; j < n; j++) {
    const right = j, left = t + (t - n) + j; // row 0 right-padded, row 1 left-padded
    [right, left].forEach((at, k) => {
      ids[at] = BigInt(row[j]);
      pos[at] = BigInt(j);
      mask[at] = 1;
      index[k * n + j] = BigInt(at); // score every position of both rows
      targets[k * n + j] = BigInt(row[j + 1]);
    });
  }
  const feeds: Record<string, ReturnType<typeof tensor>> = {
    input_ids: tensor("int64", ids, [2, t]),
    position_ids: tensor("int64", pos, [2, t]),
    attention_mask: tensor("float32", mask, [2, t]),
    token_index: tensor("int64", index, [16]),
    targets: tensor("int64", targets, [16]),
  };
  for (const sp of parameterSpecs(c)) {
    feeds[sp.name] = tensor("float32", params.get(sp.name)!, sp.shape);
  }
  const lp = (await session.run(feeds)).logprobs.data as Float32Array;
  for (let j = 0; j < n; j++) assert.ok(Math.abs(lp[j] - lp[n + j]) < 1e-5, `position ${j}`);
  await session.release();
});

Deno.test("a decode graph with constant weights gives the logits and keys of the one that reads them as inputs", async () => {
  for (const c of [TINY_LLAMA, TINY_QWEN3]) {
    const params = randomParameters(c, 5);
    const inputs = await createSession(buildDecodeGraph(c, { lastOnly: true }).toModel());
    const constants = await createSession(
      buildDecodeGraph(c, { lastOnly: true, weights: params }).toModel(),
    );
    assert.ok(!constants.inputNames.some((n) => n.startsWith("model.")), "no parameter inputs");
    const b = 2, t = 3, hkv = c.num_key_value_heads;
    const feeds: Record<string, ReturnType<typeof tensor>> = {
      input_ids: tensor("int64", BigInt64Array.from([1n, 2n, 3n, 0n, 4n, 5n]), [b, t]),
      position_ids: tensor("int64", BigInt64Array.from([0n, 1n, 2n, 0n, 0n, 1n]), [b, t]),
      attention_mask: tensor("float32", Float32Array.from([1, 1, 1, 0, 1, 1]), [b, t]),
    };
    for (let l = 0; l < c.num_hidden_layers; l++) {
      for (const k of ["key", "value"]) {
        feeds[`past.${l}.${k}`] = tensor("float32", new Float32Array(0), [b, hkv, 0, c.head_dim]);
      }
    }
    const weights = Object.fromEntries(
      parameterSpecs(c).map((s) => [s.name, tensor("float32", params.get(s.name)!, s.shape)]),
    );
    const want = await inputs.run({ ...feeds, ...weights });
    const got = await constants.run(feeds);
    for (const name of ["logits", "new.0.key", `new.${c.num_hidden_layers - 1}.value`]) {
      const a = want[name].data as Float32Array, g = got[name].data as Float32Array;
      assert.equal(g.length, a.length);
      a.forEach((x, i) =>
        assert.ok(Math.abs(x - g[i]) <= 1e-5 * (1 + Math.abs(x)), `${name}[${i}]`)
      );
    }
    await inputs.release();
    await constants.release();
  }
});

Deno.test("a decode graph refuses constant weights of the wrong size", () => {
  const params = randomParameters(TINY_LLAMA, 5);
  params.set("model.norm.weight", new Float32Array(3));
  assert.throws(
    () => buildDecodeGraph(TINY_LLAMA, { lastOnly: true, weights: params }),
    /weight model\.norm\.weight must hold 8 floats: current length is 3/,
  );
});
