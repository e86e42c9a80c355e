/** Decode-graph runners for vision tests: one row through the plain or image decode graph. */
import { createSession, tensor } from "../../../workers/engine/mod.ts";
import { decoderParameterSpecs } from "../../../workers/model/config.ts";
import { buildDecodeGraph } from "../../../workers/model/llama.ts";
import type { Policy } from "../../../workers/model/policy.ts";

type Feeds = Record<string, ReturnType<typeof tensor>>;

/** The all-positions decode graphs (plain and with image embeddings) of a policy's parameters. */
export async function decoders(policy: Policy) {
  const c = policy.config;
  const plain = await createSession(buildDecodeGraph(c, { lastOnly: false }).toModel());
  const images = await createSession(
    buildDecodeGraph(c, { lastOnly: false, images: true }).toModel(),
  );
  const params: Feeds = Object.fromEntries(
    decoderParameterSpecs(c).map((s) => [
      s.name,
      tensor("float32", policy.params.get(s.name)!, s.shape),
    ]),
  );
  /** One row: new ids at positions P.., optional injected embeddings → logits (T, V), new cache. */
  const step = async (
    past: Feeds | null,
    ids: number[],
    start: number,
    inject?: { embeds: Float32Array; index: number[] },
  ) => {
    const t = ids.length, p = start;
    const cache: Feeds = past ?? {};
    if (!past) {
      for (let l = 0; l < c.num_hidden_layers; l++) {
        for (const k of ["key", "value"]) {
          cache[`past.${l}.${k}`] = tensor("float32", new Float32Array(0), [1, 2, 0, c.head_dim]);
        }
      }
    }
    const feeds: Feeds = {
      ...params,
      ...cache,
      input_ids: tensor("int64", BigInt64Array.from(ids, BigInt), [1, t]),
      position_ids: tensor("int64", BigInt64Array.from(ids, (_, j) => BigInt(p + j)), [1, t]),
      attention_mask: tensor("float32", new Float32Array(p + t).fill(1), [1, p + t]),
    };
    if (inject) {
      feeds.image_embeds = tensor("float32", inject.embeds, [inject.index.length, c.hidden_size]);
      const index = BigInt64Array.from(ids, (_, j) => BigInt(j));
      inject.index.forEach((j, k) => (index[j] = BigInt(t + k)));
      feeds.merge_index = tensor("int64", index, [1, t]);
    }
    const r = await (inject ? images : plain).run(feeds);
    const next: Feeds = {};
    for (let l = 0; l < c.num_hidden_layers; l++) {
      for (const k of ["key", "value"]) {
        const old = cache[`past.${l}.${k}`], fresh = r[`new.${l}.${k}`];
        const [, h, pp, d] = old.dims;
        const out = new Float32Array(h * (pp + t) * d);
        for (let q = 0; q < h; q++) {
          out.set(
            (old.data as Float32Array).subarray(q * pp * d, (q + 1) * pp * d),
            q * (pp + t) * d,
          );
          out.set(
            (fresh.data as Float32Array).subarray(q * t * d, (q + 1) * t * d),
            (q * (pp + t) + pp) * d,
          );
        }
        next[`past.${l}.${k}`] = tensor("float32", out, [1, h, pp + t, d]);
      }
    }
    return { logits: r.logits.data as Float32Array, past: next };
  };
  const release = async () => {
    await plain.release();
    await images.release();
  };
  return { step, release };
}

/** log-softmax of row t of logits (T, V) at token `id`. */
export function logProb(logits: Float32Array, v: number, t: number, id: number): number {
  const row = Array.from(logits.subarray(t * v, (t + 1) * v));
  const m = Math.max(...row);
  return row[id] - (m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0)));
}
