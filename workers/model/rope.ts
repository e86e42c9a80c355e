/**
 * Rotary position embedding frequencies (RoPE, Su et al. 2021, "RoFormer", eq. 15:
 * θᵢ = base^(−2i/D)), with Llama 3's frequency-dependent scaling (`rope_type: "llama3"`,
 * Meta's Llama 3.1 release; the same formula as `_compute_llama3_parameters` in
 * transformers' `src/transformers/modeling_rope_utils.py`).
 */
import type { DecoderConfig, RopeScaling } from "./config.ts";

/**
 * RoPE inverse frequencies (D/2,) for a config, in radians per position:
 * `inv_freq[i] = 1 / rope_theta^(2i / head_dim)`, then rescaled by `rope_scaling` when it is
 * Llama 3's. The angle of pair i at position p is `p · inv_freq[i]`.
 */
export function ropeInverseFrequencies(c: DecoderConfig): number[] {
  const base = Array.from(
    { length: c.head_dim / 2 },
    (_, i) => 1 / c.rope_theta ** ((2 * i) / c.head_dim),
  );
  return c.rope_scaling ? base.map((f) => llama3Frequency(f, c.rope_scaling!)) : base;
}

/**
 * Llama 3 scaling of one inverse frequency f. With wavelength λ = 2π / f, L the original
 * context (`original_max_position_embeddings`), λ_low = L / low_freq_factor and
 * λ_high = L / high_freq_factor:
 * - λ < λ_high (high frequencies): f unchanged;
 * - λ > λ_low (low frequencies): f / factor;
 * - otherwise: (1 − s)·f/factor + s·f with s = (L/λ − low_freq_factor) /
 *   (high_freq_factor − low_freq_factor).
 */
export function llama3Frequency(f: number, s: RopeScaling): number {
  const wavelength = (2 * Math.PI) / f;
  const low = s.original_max_position_embeddings / s.low_freq_factor;
  const high = s.original_max_position_embeddings / s.high_freq_factor;
  if (wavelength < high) return f;
  if (wavelength > low) return f / s.factor;
  const smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) /
    (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * (f / s.factor) + smooth * f;
}
