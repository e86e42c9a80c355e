/**
 * The vision part of a Hugging Face `config.json` (hf.ts): a SigLIP-style `vision_config`
 * object, a top-level `image_token_id` and LLaVA's top-level `projector_hidden_act`.
 */
import { z } from "zod";
import type { DecoderConfig, VisionActivation } from "./config.ts";
import { validateVisionConfig } from "./image.ts";

const positive = z.number().int().positive();

/** The vision fields of `config.json`, for the config schema of hf.ts. */
export const visionJsonFields = {
  vision_config: z.looseObject({
    image_size: positive,
    patch_size: positive,
    num_channels: positive.optional(),
    hidden_size: positive,
    intermediate_size: positive,
    num_hidden_layers: positive,
    num_attention_heads: positive,
    layer_norm_eps: z.number().positive().optional(),
    hidden_act: z.string().optional(),
  }).nullish(),
  image_token_id: z.number().int().nonnegative().nullish(),
  projector_hidden_act: z.string().optional(),
};

const visionJsonSchema = z.object(visionJsonFields);
/** Parsed vision fields. */
type VisionJson = z.infer<typeof visionJsonSchema>;

/**
 * Add the vision part of parsed `json` to `config` (in place), with SigLIP's defaults
 * (3 channels, eps 1e-6, `gelu_pytorch_tanh`) and LLaVA's projector default (`gelu`).
 * @throws {ImageError} when the vision config is not usable (validateVisionConfig).
 */
export function addVisionConfig(config: DecoderConfig, json: VisionJson): void {
  const v = json.vision_config;
  if (!v) return;
  config.vision_config = {
    image_size: v.image_size,
    patch_size: v.patch_size,
    num_channels: v.num_channels ?? 3,
    hidden_size: v.hidden_size,
    intermediate_size: v.intermediate_size,
    num_hidden_layers: v.num_hidden_layers,
    num_attention_heads: v.num_attention_heads,
    layer_norm_eps: v.layer_norm_eps ?? 1e-6,
    hidden_act: (v.hidden_act ?? "gelu_pytorch_tanh") as VisionActivation,
    projector_hidden_act: (json.projector_hidden_act ?? "gelu") as VisionActivation,
  };
  config.image_token_id = json.image_token_id ?? null;
  validateVisionConfig(config);
}

/** The `config.json` fields of a config's vision part (none for a text-only config). */
export function visionConfigToJson(c: DecoderConfig): Record<string, unknown> {
  const v = c.vision_config;
  if (!v) return {};
  return {
    vision_config: {
      model_type: "siglip_vision_model",
      image_size: v.image_size,
      patch_size: v.patch_size,
      num_channels: v.num_channels,
      hidden_size: v.hidden_size,
      intermediate_size: v.intermediate_size,
      num_hidden_layers: v.num_hidden_layers,
      num_attention_heads: v.num_attention_heads,
      layer_norm_eps: v.layer_norm_eps,
      hidden_act: v.hidden_act,
    },
    image_token_id: c.image_token_id,
    projector_hidden_act: v.projector_hidden_act,
  };
}
