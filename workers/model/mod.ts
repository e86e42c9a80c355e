/**
 * Public surface of workers/model: the decoder config and parameter layout, the Llama/Qwen2
 * graphs, training objectives (the generic interface and token NLL), batching, generation, the `Policy` the trainer calls, and (from E2's files)
 * sampling, AdamW, safetensors and Hugging Face directory I/O, tokenizers and initialisation;
 * for vision-language models the image inputs (image.ts) and the image encoder (vision.ts).
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
  type TrainStepResult,
} from "./policy.ts";
export * from "./sampling.ts";
export * from "./json_automaton.ts";
export * from "./constrained_decoding.ts";
export { tokenBytes } from "./token_bytes.ts";
export * from "./optim.ts";
export * from "./safetensors.ts";
export * from "./tokenizer.ts";
export * from "./hf.ts";
export * from "./init.ts";
