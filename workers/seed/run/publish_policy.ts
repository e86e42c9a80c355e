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

/** Uploads a folder (`v<k>` or `base`) of files and returns its `s3://…/` URI. */
export type PolicyUpload = (
  folder: string,
  files: { name: string; bytes: Uint8Array }[],
) => Promise<string>;

/** What to publish. */
export interface PolicyPublisherOptions {
  /** The job context's `publishRolloutPolicy`, or {@link storeUpload}. */
  upload: PolicyUpload;
  /**
   * θ as a Hugging Face model; its `parameters` are the live ones (a LoRA job's hold the base
   * tensors and the adapter's).
   */
  model: HfModel;
  /** LoRA jobs: the adapter settings and the base name written into `adapter_config.json`. */
  lora?: { config: LoraConfig; baseModel: string };
}

/**
 * An upload straight to a store, at the key layout of the module doc (the worker's context does the
 * same).
 */
export function storeUpload(
  store: ArtifactStore,
  job: { tenantId: string; jobId: string; attempt: number },
): PolicyUpload {
  return async (folder, files) => {
    const prefix = `${
      jobPrefix(job.tenantId, job.jobId)
    }rollout-policy/${folder}/attempt-${job.attempt}/`;
    for (const f of files) await store.put(prefix + f.name, f.bytes);
    return `s3://${store.bucket}/${prefix}`;
  };
}

/**
 * A `publish(version)` for the trainer (`TrainerParts.remote.publish`): uploads the version's
 * folder and returns where it lies.
 */
export function policyPublisher(
  opts: PolicyPublisherOptions,
): (version: number) => Promise<PublishedPolicy> {
  const { upload, model, lora } = opts;
  const list = (m: Map<string, Uint8Array>) => [...m].map(([name, bytes]) => ({ name, bytes }));
  let basePath: string | undefined;
  return async (version) => {
    const c = model.config;
    if (!lora) {
      return {
        kind: "checkpoint",
        path: await upload(`v${version}`, list(saveHfDirectory(model))),
      };
    }
    if (!basePath) {
      const base = new Map(parameterSpecs(c).map((s) => [s.name, model.parameters.get(s.name)!]));
      basePath = await upload("base", list(saveHfDirectory({ ...model, parameters: base })));
    }
    const adapter = saveAdapter(c, lora.config, model.parameters, lora.baseModel);
    return { kind: "lora", path: await upload(`v${version}`, list(adapter)), basePath };
  };
}
