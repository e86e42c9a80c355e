import assert from "node:assert/strict";
import { LORA_TARGET_MODULES } from "../../../jobs/spec.ts";
import { createSession, Graph, tensor } from "../../../workers/engine/mod.ts";
import { type DecoderConfig, parameterSpecs } from "../../../workers/model/config.ts";
import { buildTrainGraph } from "../../../workers/model/llama.ts";
import {
  ADAPTER_FILES,
  adapterBaseReference,
  initLoraParameters,
  LORA_DROPOUT_SEED,
  LORA_MODULES,
  type LoraConfig,
  LoraError,
  loraLinear,
  loraParameterSpecs,
  mergeLora,
  readAdapter,
  saveAdapter,
} from "../../../workers/model/lora.ts";
import { TOKEN_NLL } from "../../../workers/model/objective.ts";
import { AdamW } from "../../../workers/model/optim.ts";
import { Policy } from "../../../workers/model/policy.ts";
import { readSafetensors } from "../../../workers/model/safetensors.ts";
import { packSamples, type Sample } from "../../../workers/model/batch.ts";
import { lcg } from "../engine/_gradcheck.ts";
import { randomParameters, TINY_LLAMA, TINY_QWEN } from "./_tiny.ts";

const SAMPLES: Sample[] = [
  { prompt: [1, 5, 5, 7], response: [3, 9, 2] },
  { prompt: [1, 4], response: [6, 6, 10, 8, 2] },
];
const BUCKET = { batch: 2, length: 8, tokens: 16 }; // 8 scored tokens + 8 unused slots
const ALL: LoraConfig = { rank: 2, alpha: 3, dropout: 0, target_modules: [...LORA_MODULES] };

/** Base and adapter parameters in one map; B random (a fresh B = 0 would make every dA zero). */
function withAdapter(c: DecoderConfig, lora: LoraConfig, seed = 5) {
  const params = randomParameters(c, seed);
  const rnd = lcg(seed + 1);
  for (const s of loraParameterSpecs(c, lora)) {
    const n = s.shape[0] * s.shape[1];
    params.set(s.name, Float32Array.from({ length: n }, () => (rnd() - 0.5) * 1.2));
  }
  return params;
}

/** Feeds of the train/score graphs for SAMPLES in float64, parameters from `params`. */
function feeds(
  specs: { name: string; shape: number[] }[],
  params: ReadonlyMap<string, ArrayLike<number>>,
) {
  const packed = packSamples(SAMPLES, BUCKET, 0);
  const dims = [2, 8], rDims = [16];
  const out: Record<string, ReturnType<typeof tensor>> = {
    input_ids: tensor("int64", packed.inputIds, dims),
    position_ids: tensor("int64", packed.positionIds, dims),
    token_index: tensor("int64", packed.tokenIndex, rDims),
    targets: tensor("int64", packed.targets, rDims),
    attention_mask: tensor("float64", Float64Array.from(packed.attentionMask), dims),
    loss_mask: tensor("float64", Float64Array.from(packed.lossMask), rDims),
    response_tokens: tensor("float64", new Float64Array(16).fill(8), rDims), // per-token divisors
  };
  for (const s of specs) {
    out[s.name] = tensor("float64", Float64Array.from(params.get(s.name)!), s.shape);
  }
  return out;
}

/**
 * d loss / d (A, B) of the LoRA train graph against float64 central differences, on the
 * largest-gradient coordinate and 3 random ones of every adapter tensor.
 */
async function checkAdapterGradients(c: DecoderConfig, lora: LoraConfig) {
  const g = buildTrainGraph(c, BUCKET, { objective: TOKEN_NLL, dtype: "float64", lora });
  const session = await createSession(g.toModel());
  const base = parameterSpecs(c), adapter = loraParameterSpecs(c, lora);
  assert.deepEqual(
    session.outputNames.filter((n) => n.startsWith("grad.")).sort(),
    adapter.map((s) => `grad.${s.name}`).sort(),
    "gradients of the adapter only",
  );
  const params = new Map(
    [...withAdapter(c, lora)].map(([k, v]) => [k, Float64Array.from(v)] as const),
  );
  const f = feeds([...base, ...adapter], params);
  if (lora.dropout > 0) f[LORA_DROPOUT_SEED] = tensor("int64", BigInt64Array.of(77n), []);
  const run = async () => {
    for (const s of adapter) f[s.name] = tensor("float64", params.get(s.name)!, s.shape);
    return await session.run(f);
  };
  const at = await run();
  const rnd = lcg(11), eps = 1e-6;
  let worst = 0, where = "", checked = 0;
  for (const s of adapter) {
    const grad = at[`grad.${s.name}`].data as Float64Array;
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
  assert.ok(checked >= adapter.length, `too few coordinates checked: ${checked}`);
  assert.ok(worst < 1e-5, `max rel err ${worst} at ${where}`);
}

Deno.test("the LoRA train graph's adapter gradients match float64 finite differences (Llama: GQA, all 7 projections)", async () => {
  await checkAdapterGradients(TINY_LLAMA, ALL);
});

Deno.test("the LoRA train graph's adapter gradients match float64 finite differences (Qwen2: QKV bias, dropout 0.3)", async () => {
  await checkAdapterGradients(TINY_QWEN, {
    rank: 3,
    alpha: 8,
    dropout: 0.3,
    target_modules: ["q_proj", "v_proj", "down_proj"],
  });
});

Deno.test("LoRA dropout keeps a share 1 − p of the inputs, scaled by 1/(1 − p), fixed by its seed", async () => {
  // y = 0·x + 1·dropout(x)·Iᵀ·Iᵀ with x = 1: y is the dropout mask itself.
  const n = 64,
    p = 0.25,
    lora: LoraConfig = { rank: n, alpha: n, dropout: p, target_modules: ["q_proj"] };
  const g = new Graph("dropout", "float32");
  const x = g.input("x", [64, n]);
  const eye = Float32Array.from({ length: n * n }, (_, i) => (i % (n + 1) === 0 ? 1 : 0));
  const y = loraLinear(g, x, g.floats(new Float32Array(n * n), [n, n]), undefined, {
    stem: "m",
    salt: 3,
    adapter: {
      lora,
      params: new Map([["m.lora_A.weight", g.floats(eye, [n, n])], [
        "m.lora_B.weight",
        g.floats(eye, [n, n]),
      ]]),
      dropoutSeed: g.input(LORA_DROPOUT_SEED, [], { dtype: "int64" }),
    },
  });
  g.output(y, "y");
  const session = await createSession(g.toModel());
  const ones = tensor("float32", new Float32Array(64 * n).fill(1), [64, n]);
  const run = async (seed: bigint) =>
    (await session.run({
      x: ones,
      [LORA_DROPOUT_SEED]: tensor("int64", BigInt64Array.of(seed), []),
    }))
      .y.data as Float32Array;
  const [a, a2, b] = [await run(1n), await run(1n), await run(2n)];
  await session.release();
  const kept = a.filter((v) => v !== 0);
  assert.ok(
    kept.every((v) => Math.abs(v - 1 / (1 - p)) < 1e-6),
    "kept inputs are scaled by 1/(1 − p)",
  );
  const share = kept.length / a.length; // 4096 draws: σ ≈ 0.007
  assert.ok(Math.abs(share - (1 - p)) < 0.03, `kept share ${share}`);
  assert.deepEqual(a, a2, "the same seed draws the same mask");
  const differ = a.reduce((k, v, i) => k + ((v === 0) !== (b[i] === 0) ? 1 : 0), 0) / a.length;
  assert.ok(differ > 0.25, `another seed draws another mask (${differ} of entries differ)`);
});

Deno.test("merged weights W + (α/r)·B·A score the same tokens as the adapter forward (float64)", async () => {
  const c = TINY_QWEN, lora = ALL, scale = lora.alpha / lora.rank;
  const params = withAdapter(c, lora, 9);
  const merged = mergeLora(c, params, lora, parameterSpecs(c));
  // By hand, in float64: M = W + (α/r)·B·A for every targeted projection (o, i).
  const exact = new Map<string, Float64Array>();
  for (const s of parameterSpecs(c)) {
    const w = params.get(s.name)!, stem = s.name.replace(/\.weight$/, "");
    const a = params.get(`${stem}.lora_A.weight`), b = params.get(`${stem}.lora_B.weight`);
    const m = Float64Array.from(w);
    if (a && b) {
      const [rows, cols] = s.shape;
      for (let o = 0; o < rows; o++) {
        for (let i = 0; i < cols; i++) {
          for (let k = 0; k < lora.rank; k++) {
            m[o * cols + i] += scale * b[o * lora.rank + k] * a[k * cols + i];
          }
        }
      }
    }
    exact.set(s.name, m);
    // mergeLora's float32 tensors are the float64 sums rounded (within 2 ulp).
    const got = merged.get(s.name)!;
    got.forEach((v, k) =>
      assert.ok(Math.abs(v - m[k]) <= 2.4e-7 * Math.abs(m[k]) + 1e-12, `${s.name}[${k}]`)
    );
  }
  assert.equal(merged.get("model.norm.weight"), params.get("model.norm.weight"), "shared");

  // The train graphs' `logprobs` (the float64 score graph would meet onnxruntime's float-only
  // QuickGelu fusion of SiLU).
  const score = async (lora: LoraConfig | undefined, p: Map<string, ArrayLike<number>>) => {
    const g = buildTrainGraph(c, BUCKET, { objective: TOKEN_NLL, dtype: "float64", lora });
    const session = await createSession(g.toModel());
    const specs = [...parameterSpecs(c), ...(lora ? loraParameterSpecs(c, lora) : [])];
    const r = await session.run(feeds(specs, p));
    await session.release();
    return r.logprobs.data as Float64Array;
  };
  const maxDiff = (x: Float64Array, y: Float64Array) =>
    x.reduce((d, v, k) => Math.max(d, Math.abs(v - y[k])), 0);
  // Both through the LoRA graph (one graph, so onnxruntime fuses and rounds alike): the adapter on
  // W, and a zero adapter on the merged M.
  const zero = new Map(
    loraParameterSpecs(c, lora).map((s) => [s.name, new Float64Array(s.shape[0] * s.shape[1])]),
  );
  const viaAdapter = await score(lora, params);
  const viaMerge = await score(lora, new Map([...exact, ...zero]));
  const diff = maxDiff(viaAdapter, viaMerge);
  assert.ok(diff < 1e-10, `max |Δ log-prob| ${diff}`);
  const moved = maxDiff(viaAdapter, await score(undefined, params));
  assert.ok(moved > 1e-2, `the adapter changes the scores (${moved})`);
});

Deno.test("a fresh adapter is PEFT's init: A uniform within ±1/√in, B zero", () => {
  const c = TINY_LLAMA, lora: LoraConfig = { ...ALL, rank: 4 };
  const p = initLoraParameters(c, lora, 3);
  for (const s of loraParameterSpecs(c, lora)) {
    const t = p.get(s.name)!;
    if (s.name.endsWith("lora_B.weight")) assert.ok(t.every((v) => v === 0), s.name);
    else {
      const bound = 1 / Math.sqrt(s.shape[1]);
      assert.ok(t.every((v) => Math.abs(v) <= bound), s.name);
      assert.ok(Math.max(...t.map(Math.abs)) > bound / 2, `${s.name} spreads over its range`);
    }
  }
  assert.deepEqual(initLoraParameters(c, lora, 3), p, "seeded");
});

Deno.test("an adapter saves with PEFT's names and config and reads back exactly", () => {
  const c = TINY_LLAMA,
    lora: LoraConfig = { rank: 2, alpha: 16, dropout: 0.05, target_modules: ["q_proj", "v_proj"] };
  const params = withAdapter(c, lora);
  const files = saveAdapter(c, lora, params, "builtin:tiny");
  const config = JSON.parse(new TextDecoder().decode(files.get(ADAPTER_FILES.config)!));
  assert.equal(config.peft_type, "LORA");
  assert.equal(config.task_type, "CAUSAL_LM");
  assert.equal(config.bias, "none");
  assert.equal(config.r, 2);
  assert.equal(config.lora_alpha, 16);
  assert.equal(config.lora_dropout, 0.05);
  assert.deepEqual(config.target_modules, ["q_proj", "v_proj"]);
  assert.equal(config.base_model_name_or_path, "builtin:tiny");
  const st = readSafetensors(files.get(ADAPTER_FILES.weights)!);
  assert.deepEqual([...st.tensors.keys()].slice(0, 2), [
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
  ]);
  assert.deepEqual(
    st.tensors.get("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight")!.shape,
    [8, 2],
  );
  assert.equal(st.tensors.size, 2 * 2 * 2);
  const back = readAdapter(c, files.get(ADAPTER_FILES.config)!, files.get(ADAPTER_FILES.weights)!);
  assert.deepEqual(back.lora, lora);
  assert.equal(back.baseModel, "builtin:tiny");
  for (const s of loraParameterSpecs(c, lora)) {
    assert.deepEqual(back.parameters.get(s.name), params.get(s.name));
  }
  assert.throws(
    () =>
      readAdapter(
        { ...c, hidden_size: 16 },
        files.get(ADAPTER_FILES.config)!,
        files.get(ADAPTER_FILES.weights)!,
      ),
    (e: Error) => e instanceof LoraError && /lora_A.weight of shape \[2,16\]/.test(e.message),
  );
});

Deno.test("a LoRA policy trains only the adapter: its gradients and AdamW state hold adapter tensors, the base stays put", async () => {
  const c = TINY_LLAMA,
    lora: LoraConfig = { rank: 2, alpha: 4, dropout: 0, target_modules: ["q_proj", "up_proj"] };
  const params = randomParameters(c, 2);
  for (const [k, v] of initLoraParameters(c, lora, 1)) params.set(k, v);
  const policy = new Policy(c, params, { lora });
  const reference = new Policy(c, params, { sessions: policy.sessions }); // the base: adapter off
  const adapterNames = loraParameterSpecs(c, lora).map((s) => s.name);
  assert.deepEqual(policy.trainableSpecs().map((s) => s.name), adapterNames);
  // B = 0: the fresh adapter changes nothing.
  const [before, ref0] = [await policy.score(SAMPLES), await reference.score(SAMPLES)];
  assert.deepEqual(before.logprobs, ref0.logprobs);

  const baseBefore = new Map(parameterSpecs(c).map((s) => [s.name, params.get(s.name)!.slice()]));
  const optimizer = new AdamW(policy.trainableSpecs(), { lr: 1e-2 });
  for (let k = 0; k < 30; k++) {
    const r = await policy.trainStep(TOKEN_NLL, SAMPLES);
    assert.deepEqual([...r.grads.keys()].sort(), [...adapterNames].sort());
    optimizer.step(params, r.grads);
  }
  const state = optimizer.state();
  assert.deepEqual([...state.expAvg.keys()].sort(), [...adapterNames].sort());
  assert.deepEqual([...state.expAvgSq.keys()].sort(), [...adapterNames].sort());
  for (const s of parameterSpecs(c)) {
    assert.deepEqual(params.get(s.name), baseBefore.get(s.name), s.name);
  }
  assert.ok(params.get("model.layers.0.mlp.up_proj.lora_B.weight")!.some((v) => v !== 0));

  const after = await policy.score(SAMPLES), ref1 = await reference.score(SAMPLES);
  assert.deepEqual(ref1.logprobs, ref0.logprobs, "π_ref (adapter off) is still the base");
  const nll = (s: typeof after) => -s.logprobs.flatMap((x) => [...x]).reduce((a, b) => a + b, 0);
  assert.ok(nll(after) < nll(before) - 0.1, `SFT lowered the NLL: ${nll(before)} → ${nll(after)}`);
  // Generation reads the adapter too: greedy decoding follows the trained scores, not π_ref's.
  const greedy = async (p: Policy) =>
    (await p.generate([SAMPLES[1].prompt], { maxNewTokens: 5, temperature: 0, seed: 0 }))[0].tokens;
  const [tuned, off] = [await greedy(policy), await greedy(reference)];
  assert.equal(tuned[0], SAMPLES[1].response[0], `greedy after SFT: ${tuned}`);
  assert.notDeepEqual(tuned, off);
  await policy.release();
});

Deno.test("an adapter names its base's own name for PEFT and keeps the service's reference in the weights' metadata", () => {
  const lora: LoraConfig = { rank: 2, alpha: 4, dropout: 0, target_modules: ["q_proj"] };
  const params = new Map([...randomParameters(TINY_LLAMA, 1, 0.1)]);
  for (const [k, v] of initLoraParameters(TINY_LLAMA, lora, 2)) params.set(k, v);
  const files = saveAdapter(TINY_LLAMA, lora, params, "model:0b5e", "Qwen/Qwen3-0.6B");
  const config = JSON.parse(new TextDecoder().decode(files.get("adapter_config.json")!));
  assert.equal(config.base_model_name_or_path, "Qwen/Qwen3-0.6B");
  assert.match(
    new TextDecoder().decode(files.get("adapter_config.json")!),
    /"lora_dropout": 0\.0,/,
  );
  const weights = files.get("adapter_model.safetensors")!;
  assert.deepEqual(readSafetensors(weights).metadata, {
    format: "pt",
    seed_base_model: "model:0b5e",
  });
  const read = readAdapter(TINY_LLAMA, files.get("adapter_config.json")!, weights);
  assert.equal(read.baseModel, "model:0b5e");
  assert.equal(adapterBaseReference(files.get("adapter_config.json")!, weights), "model:0b5e");
});

Deno.test("the JobSpec's LoRA target modules are exactly the projections the model can adapt", () => {
  assert.deepEqual([...LORA_TARGET_MODULES], [...LORA_MODULES]);
});
