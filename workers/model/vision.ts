/**
 * The image encoder of a vision-language policy as ONNX graph pieces (workers/envs/README.md,
 * "Vision tasks": patchify → linear projection → a few transformer blocks → projection to the
 * decoder width):
 *
 *   patches (N, P, C·p·p) → patch linear + learned position embeddings (N, P, Dv)
 *   → L pre-norm bidirectional blocks: x += attn(LN₁(x)); x += fc₂(act(fc₁(LN₂(x))))
 *   → post LayerNorm → projector linear₁ → act → linear₂ → (N, P, D)
 *
 * which is SigLIP's vision transformer (Zhai et al. 2023; HF `SiglipVisionModel` without the
 * pooling head) followed by LLaVA's two-layer MLP projector (Liu et al. 2023). Tensor names are
 * in config.ts. Everything is built from engine primitives, so autodiff trains the encoder end
 * to end with the decoder. Shape letters: N images, P patches per image, K = C·p·p patch values,
 * Dv encoder width, Hv encoder heads, E = Dv / Hv head width, F MLP width, D decoder width,
 * B batch rows, T tokens per row, M image tokens merged.
 */
import { type DType, type Graph, Graph as G, nn, type Value } from "../engine/mod.ts";
import {
  type DecoderConfig,
  patchesPerImage,
  type VisionActivation,
  visionParameterSpecs,
} from "./config.ts";
import { validateVisionConfig } from "./image.ts";

/** LayerNorm over the last dim (Ba et al. 2016): `(x − μ) / √(σ² + eps) · weight + bias`. */
export function layerNorm(g: Graph, x: Value, weight: Value, bias: Value, eps: number): Value {
  const mean = g.reduceMean(x, [-1], true); // (…, 1)
  const centred = g.sub(x, mean); // (…, Dv)
  const variance = g.reduceMean(g.mul(centred, centred), [-1], true); // (…, 1)
  const std = g.sqrt(g.add(variance, g.scalar(eps, x.dtype))); // (…, 1)
  return g.add(g.mul(g.div(centred, std), weight), bias);
}

/**
 * The activations HF names `gelu_pytorch_tanh` (0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
 * Hendrycks & Gimpel 2016; has float64 kernels, so gradient checks can use it), `gelu` (exact,
 * erf: float32 only on onnxruntime) and `quick_gelu` (x·σ(1.702·x), CLIP).
 */
export function activation(g: Graph, x: Value, act: VisionActivation): Value {
  const k = (v: number) => g.scalar(v, x.dtype);
  if (act === "gelu") return nn.gelu(g, x);
  if (act === "quick_gelu") return g.mul(x, g.sigmoid(g.mul(x, k(1.702))));
  const inner = g.mul(g.add(x, g.mul(g.pow(x, 3), k(0.044715))), k(Math.sqrt(2 / Math.PI)));
  return g.mul(g.mul(x, k(0.5)), g.add(g.tanh(inner), k(1)));
}

/**
 * The vision tower and projector: patches (N, P, K) → image token embeddings (N, P, D).
 * N may be symbolic (the encode graph) or static (train and score graphs).
 */
export function visionEncoder(
  g: Graph,
  c: DecoderConfig,
  p: Map<string, Value>,
  patches: Value,
): Value {
  const v = validateVisionConfig(c);
  const w = (name: string) => p.get(name)!;
  const [n, np] = patches.shape;
  const dv = v.hidden_size, hv = v.num_attention_heads, e = dv / hv;
  const k = v.num_channels * v.patch_size ** 2;
  const lin = (name: string, x: Value) => nn.linear(g, x, w(`${name}.weight`), w(`${name}.bias`));
  const norm = (name: string, x: Value) =>
    layerNorm(g, x, w(`${name}.weight`), w(`${name}.bias`), v.layer_norm_eps);

  // ---- embeddings: the Conv2d kernel (Dv, C, p, p) as a (Dv, K) linear on flattened patches
  const emb = "vision_tower.embeddings";
  const kernel = g.reshape(w(`${emb}.patch_embedding.weight`), [dv, k]); // (Dv, K)
  let x = nn.linear(g, patches, kernel, w(`${emb}.patch_embedding.bias`)); // (N, P, Dv)
  x = g.add(x, w(`${emb}.position_embedding.weight`)); // (N, P, Dv)

  // ---- pre-norm bidirectional blocks (no mask: every patch sees every patch of its image)
  const heads = (t: Value) => g.transpose(g.reshape(t, [n, np, hv, e]), [0, 2, 1, 3]); // (N, Hv, P, E)
  for (let l = 0; l < v.num_hidden_layers; l++) {
    const pre = `vision_tower.encoder.layers.${l}`;
    const a = norm(`${pre}.layer_norm1`, x); // (N, P, Dv)
    const q = heads(lin(`${pre}.self_attn.q_proj`, a)); // (N, Hv, P, E)
    const kk = heads(lin(`${pre}.self_attn.k_proj`, a)); // (N, Hv, P, E)
    const vv = heads(lin(`${pre}.self_attn.v_proj`, a)); // (N, Hv, P, E)
    const scores = g.mul(
      g.matmul(q, g.transpose(kk, [0, 1, 3, 2])),
      g.scalar(1 / Math.sqrt(e), x.dtype),
    ); // (N, Hv, P, P)
    const o = g.matmul(g.softmax(scores, -1), vv); // (N, Hv, P, E)
    const merged = g.reshape(g.transpose(o, [0, 2, 1, 3]), [n, np, dv]); // (N, P, Dv)
    x = g.add(x, lin(`${pre}.self_attn.out_proj`, merged)); // (N, P, Dv)
    const m = norm(`${pre}.layer_norm2`, x); // (N, P, Dv)
    const hidden = activation(g, lin(`${pre}.mlp.fc1`, m), v.hidden_act); // (N, P, F)
    x = g.add(x, lin(`${pre}.mlp.fc2`, hidden)); // (N, P, Dv)
  }
  x = norm("vision_tower.post_layernorm", x); // (N, P, Dv)

  // ---- projector to the decoder width
  const h = activation(g, lin("multi_modal_projector.linear_1", x), v.projector_hidden_act); // (N, P, D)
  return lin("multi_modal_projector.linear_2", h); // (N, P, D)
}

/**
 * Replace the text embeddings at image positions: `merged[b, t] = cat(text (B·T, D),
 * image (M, D))[index[b, t]]`, where int64 `index` (B, T) is b·T + t at text positions and
 * B·T + k at the k-th image token (row-major over the batch). Built from Concat and Gather, so
 * gradients flow to both the token table and the encoder. → (B, T, D).
 */
export function mergeImageEmbeds(g: Graph, text: Value, image: Value, index: Value): Value {
  const [b, t, d] = text.shape;
  const rows = typeof b === "number" && typeof t === "number" ? b * t : "B*T";
  const flat = g.reshape(text, [rows, d]); // (B·T, D)
  return g.gather(g.concat([flat, image], 0), index); // (B, T, D)
}

/** The vision parameters as graph inputs, by HF name. */
export function visionParameterInputs(
  g: Graph,
  c: DecoderConfig,
  requiresGrad: boolean,
): Map<string, Value> {
  return new Map(
    visionParameterSpecs(c).map((s) => [s.name, g.input(s.name, s.shape, { requiresGrad })]),
  );
}

/**
 * The encode graph (symbolic N): `pixel_values` (N, P, K) float from `preprocessImage` and the
 * vision parameters → `image_embeds` (N·P, D), the embeddings that replace the image tokens,
 * image by image, patch by patch. Used to prefill generation (the decode graph takes them as
 * an input).
 */
export function buildEncodeGraph(c: DecoderConfig, dtype: DType = "float32"): Graph {
  const v = validateVisionConfig(c);
  const g = new G("encode", dtype);
  const p = visionParameterInputs(g, c, false);
  const k = v.num_channels * v.patch_size ** 2;
  const pixels = g.input("pixel_values", ["N", patchesPerImage(v), k]);
  const out = visionEncoder(g, c, p, pixels); // (N, P, D)
  g.output(g.reshape(out, ["N*P", c.hidden_size]), "image_embeds"); // (N·P, D)
  return g;
}
