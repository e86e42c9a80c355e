/**
 * Publishing the policy for remote rollout engines (workers/seed/README.md, "Remote rollout
 * engines"): version k (the policy after k updates) is written to the object store as a folder
 * the endpoints load, under the job's prefix:
 *
 *     tenants/<tenant>/jobs/<job>/rollout-policy/v<k>/attempt-<n>/   full weights (HF folder) or
 *                                                                    a LoRA adapter (PEFT folder)
 *     tenants/<tenant>/jobs/<job>/rollout-policy/base/attempt-<n>/   a LoRA job's base weights
 *
 * Full weights are written in float32, as checkpoints are; the LoRA base once per attempt.
 */
import { type ArtifactStore, jobPrefix } from "../../../jobs/mod.ts";
import {
  type HfModel,
  type LoraConfig,
  parameterSpecs,
  saveAdapter,
  saveHfDirectory,
} from "../../model/mod.ts";
import type { PublishedPolicy } from "../remote_rollout.ts";

/** Where and what to publish. */
export interface PolicyPublisherOptions {
  store: ArtifactStore;
  tenantId: string;
  jobId: string;
  attempt: number;
  /**
   * θ as a Hugging Face model; its `parameters` are the live ones (a LoRA job's hold the base
   * tensors and the adapter's).
   */
  model: HfModel;
  /** LoRA jobs: the adapter settings and the base name written into `adapter_config.json`. */
  lora?: { config: LoraConfig; baseModel: string };
}

/**
 * A `publish(version)` for the trainer (`TrainerParts.remote.publish`): writes the version's
 * folder and returns where it lies (`s3://<bucket>/<prefix>/`).
 */
export function policyPublisher(
  opts: PolicyPublisherOptions,
): (version: number) => Promise<PublishedPolicy> {
  const { store, model, lora } = opts;
  const root = `${jobPrefix(opts.tenantId, opts.jobId)}rollout-policy/`;
  const attempt = `attempt-${opts.attempt}/`;
  const uri = (prefix: string) => `s3://${store.bucket}/${prefix}`;
  const put = async (prefix: string, files: Map<string, Uint8Array>) => {
    for (const [name, bytes] of files) await store.put(prefix + name, bytes);
  };
  let basePath: string | undefined;
  return async (version) => {
    const prefix = `${root}v${version}/${attempt}`;
    const c = model.config;
    if (!lora) {
      await put(prefix, saveHfDirectory(model));
      return { kind: "checkpoint", path: uri(prefix) };
    }
    if (!basePath) {
      const base = new Map(parameterSpecs(c).map((s) => [s.name, model.parameters.get(s.name)!]));
      const at = `${root}base/${attempt}`;
      await put(at, saveHfDirectory({ ...model, parameters: base }));
      basePath = uri(at);
    }
    await put(prefix, saveAdapter(c, lora.config, model.parameters, lora.baseModel));
    return { kind: "lora", path: uri(prefix), basePath };
  };
}
