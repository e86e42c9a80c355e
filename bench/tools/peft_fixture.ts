/**
 * Fixture for the PEFT check on a machine with `transformers` and `peft`
 * (bench/tools/peft_check.py): `deno run -A bench/tools/peft_fixture.ts [DIR]` (default
 * `.bench-out/peft`) writes
 * - `base/`: a small Qwen2 (QKV bias, GQA, untied head) as this service saves a Hugging Face
 *   folder;
 * - `adapter/`: a LoRA adapter on all seven projections, as a LoRA job's checkpoint holds it
 *   (`adapter_config.json`, `adapter_model.safetensors` by PEFT's names), with random A and B;
 * - `merged/`: the merged weights W + (α/r)·B·A as `model.lora.save_merged` writes them;
 * - `expected.json`: token ids and the LoRA policy's per-token log-probs of them (float32 graphs).
 * Then, on a machine with `transformers` and `peft`:
 * `python3 bench/tools/peft_check.py .bench-out/peft`.
 */
import type { DecoderConfig } from "../../workers/model/config.ts";
import { saveHfDirectory, writeHfFolder } from "../../workers/model/hf.ts";
import { initParameters } from "../../workers/model/init.ts";
import {
  LORA_MODULES,
  type LoraConfig,
  loraParameterSpecs,
  mergeLora,
  saveAdapter,
} from "../../workers/model/lora.ts";
import { parameterSpecs } from "../../workers/model/config.ts";
import { Policy } from "../../workers/model/policy.ts";
import { Rng } from "../../workers/model/sampling.ts";
import { benchCommandLine } from "../_args.ts";

/** What `--help` prints. */
const USAGE = `Writes the PEFT check's fixture (base, adapter, merged, expected.json) into DIR.

Usage: deno run -A bench/tools/peft_fixture.ts [DIR]   (default .bench-out/peft)
then, where transformers and peft are: python3 bench/tools/peft_check.py DIR`;

const dir = benchCommandLine({
  name: "bench/tools/peft_fixture.ts",
  usage: USAGE,
  options: {},
  positionals: 1,
}).positionals[0] ?? ".bench-out/peft";
const config: DecoderConfig = {
  architecture: "Qwen2ForCausalLM",
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 1e6,
  max_position_embeddings: 128,
  tie_word_embeddings: false,
  attention_bias: true,
  bos_token_id: 1,
  eos_token_id: 2,
  pad_token_id: 0,
};
const lora: LoraConfig = { rank: 4, alpha: 8, dropout: 0.05, target_modules: [...LORA_MODULES] };
// Weights of std 0.3 (not 0.02) so the adapter and every layer move the log-probs visibly.
const params = initParameters(config, 7, { std: 0.3 });
const rng = new Rng(9);
for (const s of loraParameterSpecs(config, lora)) {
  params.set(
    s.name,
    Float32Array.from({ length: s.shape[0] * s.shape[1] }, () => rng.next() - 0.5),
  );
}
const tokenizer = {
  tokenizerJson: {
    version: "1.0",
    model: {
      type: "BPE",
      vocab: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`t${i}`, i])),
      merges: [],
    },
  },
  tokenizerConfig: null,
};
const model = { config, parameters: params, tokenizer, generationConfig: null };
await writeHfFolder(`${dir}/base`, saveHfDirectory(model));
await writeHfFolder(`${dir}/adapter`, saveAdapter(config, lora, params, "base"));
const merged = mergeLora(config, params, lora, parameterSpecs(config));
await writeHfFolder(`${dir}/merged`, saveHfDirectory({ ...model, parameters: merged }));
const ids = [[1, 5, 9, 33, 3, 7, 60, 4, 12, 12], [1, 4, 8, 8, 2, 6, 6, 9, 41, 50]];
const policy = new Policy(config, params, { lora, threads: 1 });
const scored = await policy.score(ids.map((row) => ({ prompt: [row[0]], response: row.slice(1) })));
await policy.release();
await Deno.writeTextFile(
  `${dir}/expected.json`,
  JSON.stringify({ ids, logprobs: scored.logprobs.map((l) => Array.from(l)) }),
);
console.log(`wrote ${dir}/{base,adapter,merged,expected.json}`);
