/**
 * The SEED algorithm's model-independent parts (DESIGN.md §8; Wu et al. 2026, arXiv 2607.14777):
 * rollout loop, samples, advantage estimators (GRPO, GiGPO), analyzer prompt and parsing, skill
 * insertion, the skill library, a float64 reference of the update loss, and step metrics.
 * The trainer ties these to the engine and envs.
 */
export * from "./errors.ts";
export * from "./advantage.ts";
export * from "./skills.ts";
export * from "./analyze.ts";
export * from "./skill_library.ts";
export * from "./skill_choice.ts";
export * from "./samples.ts";
export * from "./losses.ts";
export * from "./rollout.ts";
export * from "./metrics.ts";
export * from "./signal_metrics.ts";
export * from "./seeds.ts";
export * from "./text_policy.ts";
export * from "./model_source.ts";
export * from "./warmup.ts";
export * from "./evaluate.ts";
export * from "./checkpoint.ts";
export * from "./trainer.ts";
export { createSeedHandler, registerSeedHandlers, type SeedHandlerOptions } from "./handler.ts";
