/**
 * The language model of the workers (README.md, Architecture): a Llama/Qwen2-style decoder
 * (Hugging Face `LlamaForCausalLM` / `Qwen2ForCausalLM`, optionally with an image encoder) as ONNX
 * graphs built with workers/engine, and everything needed to train and run it on onnxruntime.
 *
 * - config.ts: the decoder config and parameter layout (Hugging Face names and shapes);
 * - llama.ts: the train, score and decode graphs; vision.ts, image.ts: the image encoder, the
 *   `<image>` placeholder and the CPU preprocessing of vision-language models;
 * - objective.ts: the `TrainObjective` interface and `TOKEN_NLL` (the SFT objective);
 * - policy.ts: `Policy`, what a trainer calls (train step, token scores, generation) with cached
 *   onnxruntime sessions; batch.ts: packing samples into fixed-shape buckets;
 * - generate.ts, kv_cache.ts, sampling.ts: batched generation with a KV cache and seeded sampling;
 *   json_automaton.ts, constrained_decoding.ts, token_bytes.ts, text_pattern.ts: decoding under a
 *   JSON schema (string values optionally held to a regular text pattern);
 * - lora.ts: LoRA adapters (graph term, init, merge, PEFT adapter files);
 * - optim.ts: AdamW, gradient-norm clipping, learning-rate schedules;
 * - hf.ts, safetensors.ts, tokenizer.ts, init.ts: Hugging Face model folders, safetensors,
 *   tokenizers and chat templates, the `builtin:tiny` model and seeded initialisation;
 *   chat_template.ts: prompt forms (a model's own chat template, or plain for builtin models)
 *   and the end-of-turn token, shared by training and serving.
 *
 * The model knows nothing of SEED or of any other algorithm: the train graph is built from an
 * objective it is given (`Policy.trainStep(objective, …)`, `buildTrainGraph(…, { objective })`).
 * The graph computes the per-token log-prob ℓθ and entropy H of the response tokens; the objective
 * turns them and its own inputs, fed by name, into the loss and named outputs. The SEED objective
 * lives in workers/seed/objective.ts. This folder imports workers/engine and npm packages only,
 * never workers/seed.
 */
export * from "./config.ts";
export {
  type Bucket,
  buildDecodeGraph,
  buildScoreGraph,
  buildTrainGraph,
  DecoderConfigError,
  type FloatType,
  type KvValues,
  TRAIN_GRAPH_INPUTS,
  validateConfig,
} from "./llama.ts";
export * from "./objective.ts";
export {
  BatchError,
  bucketFor,
  bucketOf,
  type PackedBatch,
  packSamples,
  planMicroBatches,
  prepareSamples,
  type Sample,
} from "./batch.ts";
export * from "./image.ts";
export {
  activation,
  buildEncodeGraph,
  layerNorm,
  mergeImageEmbeds,
  visionEncoder,
  visionParameterInputs,
} from "./vision.ts";
export { KvCache } from "./kv_cache.ts";
export {
  type DecodeRunner,
  type FinishReason,
  generate,
  GenerateError,
  type GenerateOptions,
  type Generation,
} from "./generate.ts";
export {
  Policy,
  PolicyError,
  type PolicyOptions,
  type TokenScores,
  type TrainSample,
  type TrainStepOptions,
  type TrainStepResult,
} from "./policy.ts";
export * from "./lora.ts";
export * from "./sampling.ts";
export * from "./json_automaton.ts";
export * from "./text_pattern.ts";
export * from "./constrained_decoding.ts";
export { tokenBytes } from "./token_bytes.ts";
export * from "./optim.ts";
export * from "./safetensors.ts";
export * from "./tokenizer.ts";
export * from "./chat_template.ts";
export * from "./hf.ts";
export * from "./init.ts";
