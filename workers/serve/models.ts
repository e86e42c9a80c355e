/**
 * The models the server decodes with: a tenant's job checkpoints, loaded from the artifact store
 * with every file checked against the SHA-256 recorded in its checkpoint row (jobs/artifacts.ts
 * `readCheckpointFile`), kept in a bounded least-recently-used cache. Each checkpoint gets a decode
 * session of its own whose weights are constants of the graph, so onnxruntime pre-packs every
 * weight matrix once at load: with weights fed as inputs, each decode step transposed and packed
 * all of them again (at 32 sequences on the bench's 24M config, 2.7× the step's time). A
 * checkpoint too large for one ONNX protobuf (over `CONSTANT_WEIGHT_BYTES`) falls back to one
 * session per config with the weights as inputs.
 *
 * Model names: `job:<id>` (the job's latest checkpoint, looked up at each request),
 * `job:<id>@<step>`, or `model:<id>` (a model the tenant uploaded, `POST /v1/models`, served as
 * uploaded). A LoRA job's checkpoint that holds only its adapter is served as its base with the
 * adapter merged in at load, the base resolved as the trainer resolves it
 * (workers/seed/run/model_source.ts: builtin models from the checkpoint's trainer state, uploaded
 * models, a chain of `job:` adapters). Only the requesting tenant's jobs and models resolve;
 * another tenant's read as missing (404), as in the job API. A file whose object fails its
 * SHA-256 is refused (IntegrityError → 502) and not cached, so it is never served.
 *
 * A request holds its checkpoint from lookup to its last token ({@link ModelRegistry.acquire}):
 * a checkpoint the LRU drops while requests still decode on it keeps its session until the last
 * of them lets go, and is released then (onnxruntime's native memory: the weights and their
 * pre-packed copies), not whenever the garbage collector gets to it.
 */
import {
  type ArtifactStore,
  type Checkpoint,
  type Database,
  getCheckpoint,
  getJob,
  getModel,
  getSkillLibrary,
  latestCheckpoint,
  type Model,
  readCheckpointFile,
  readSkillLibrary,
} from "../../jobs/mod.ts";
import { resolveEnvironment } from "../envs/mod.ts";
import { resolveModel } from "../seed/run/model_source.ts";
import type { ArtifactReader, ResumePoint } from "../worker/handler.ts";
import { createSession, type SessionCache, tensor } from "../engine/mod.ts";
import {
  ADAPTER_FILES,
  buildDecodeGraph,
  checkpointModelReader,
  declaredEosTokenIds,
  type DecoderConfig,
  decoderParameterSpecs,
  type HfModel,
  loadHfDirectory,
  type Parameters,
  type PromptForm,
  promptFormOf,
  stopTokenIdsOf,
  Tokenizer,
} from "../model/mod.ts";
import { SkillLibrary } from "../skills/mod.ts";
import type { DecodeModel } from "./engine.ts";
import { badRequest, modelNotFound } from "./errors.ts";

/** How chat messages become a prompt (workers/model/chat_template.ts). */
export type { PromptForm };

/** A loaded checkpoint or uploaded model, ready to decode. */
export interface ServedModel extends DecodeModel {
  /** `job:<id>@<step>` (the checkpoint that answered) or `model:<id>`. */
  id: string;
  /** The job of a checkpoint; null for an uploaded model. */
  jobId: string | null;
  /** The checkpoint's step; null for an uploaded model. */
  step: number | null;
  tokenizer: Tokenizer;
  /**
   * `chat_template` when the tokenizer has a chat template of its own; `plain` for builtin
   * models (their tokenizers carry a generic ChatML template, but they are trained on plain
   * prompts) and tokenizers without one: `promptFormOf` (workers/model/chat_template.ts), as the
   * trainer decides it.
   */
  promptForm: PromptForm;
  /**
   * Token ids that end a choice: `stopTokenIdsOf(tokenizer, promptForm, declaredEosTokenIds(…))`
   * (workers/model/chat_template.ts), every EOS id the model's generation_config.json lists
   * included, as the trainer stops.
   */
  stopTokenIds: number[];
  /** When the checkpoint was committed or the model uploaded. */
  createdAt: Date;
}

/** A parsed model name: a job's checkpoint (latest when `step` is undefined) or an upload. */
export type ModelRef =
  | { kind: "job"; jobId: string; step?: number }
  | { kind: "model"; modelId: string };

const UUID = "([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})";
const JOB_NAME = new RegExp(`^job:${UUID}(?:@(\\d{1,9}))?$`);
const UPLOAD_NAME = new RegExp(`^model:${UUID}$`);

/**
 * Parses `job:<id>`, `job:<id>@<step>` or `model:<id>`.
 * @throws ServeError 404 (OpenAI's `model_not_found`) for any other name.
 */
export function parseModelName(name: string): ModelRef {
  const upload = UPLOAD_NAME.exec(name);
  if (upload) return { kind: "model", modelId: upload[1] };
  const m = JOB_NAME.exec(name);
  if (!m) {
    throw modelNotFound(
      `The model ${
        JSON.stringify(name.slice(0, 200))
      } does not exist: models are named job:<job id>, job:<job id>@<step>, model:<model id>, or by the name given to /v1/load_checkpoint or /v1/load_lora_adapter`,
    );
  }
  return { kind: "job", jobId: m[1], step: m[2] === undefined ? undefined : Number(m[2]) };
}

/** What a model name resolved to for a tenant: a committed checkpoint or an uploaded model. */
export type ServedSource =
  | { kind: "checkpoint"; tenantId: string; checkpoint: Checkpoint; createdAt: Date }
  | { kind: "model"; tenantId: string; model: Model; createdAt: Date };

/**
 * Largest parameter size (bytes) built into a session as constants: an ONNX model is one
 * protobuf message, which cannot exceed 2 GiB, and building it holds about two more copies of
 * the weights for a moment.
 */
export const CONSTANT_WEIGHT_BYTES = 2 ** 30;

/**
 * The decode-graph view of a checkpoint's config and parameters: a session of its own with the
 * weights as constants (see module doc; `sessions` gives its thread settings and is not used
 * to keep it), or, over {@link CONSTANT_WEIGHT_BYTES}, the session `sessions` shares per config
 * with the parameters as inputs. Only a session of its own comes with `release` (the shared one
 * is `sessions`' to release).
 */
export async function decodeModel(
  key: string,
  config: DecoderConfig,
  parameters: Parameters,
  sessions: SessionCache,
): Promise<DecodeModel> {
  const specs = decoderParameterSpecs(config);
  const bytes = specs.reduce((n, s) => n + 4 * s.shape.reduce((a, d) => a * d, 1), 0);
  if (bytes <= CONSTANT_WEIGHT_BYTES) {
    const graph = buildDecodeGraph(config, { lastOnly: true, weights: parameters });
    const session = await createSession(graph.toModel(), sessions.opts);
    return { key, config, session, parameters: {}, release: () => session.release() };
  }
  const session = await sessions.get(
    `decode:${JSON.stringify(config)}`,
    () => buildDecodeGraph(config, { lastOnly: true }).toModel(),
  );
  const feeds = Object.fromEntries(
    specs.map((s) => [
      s.name,
      tensor("float32", parameters.get(s.name)!, s.shape),
    ]),
  );
  return { key, config, session, parameters: feeds };
}

/** Options of {@link ModelRegistry}. */
export interface ModelRegistryOptions {
  db: Database;
  store: ArtifactStore;
  sessions: SessionCache;
  /** Checkpoints kept loaded (default 4); the least recently used beyond that are dropped. */
  maxModels?: number;
}

/** A checkpoint held by a request: `release` lets go of it (once; later calls do nothing). */
export interface HeldModel {
  model: ServedModel;
  release(): void;
}

/** A cached checkpoint and the requests holding it. */
interface Entry {
  model: Promise<ServedModel>;
  holders: number;
  /** Dropped from the LRU: its session is released once no request holds it. */
  evicted: boolean;
  freed: boolean;
}

/** Loads and caches checkpoints and skill libraries for requests (see module doc). */
export class ModelRegistry {
  readonly #models = new Map<string, Entry>();
  /** Evicted entries some request still holds. */
  readonly #retiring = new Set<Entry>();
  readonly #libraries = new Map<string, Promise<SkillLibrary>>();
  readonly #maxModels: number;
  /** Loads so far: each loaded copy's engine key ends in its number (see `acquire`). */
  #loads = 0;

  constructor(private readonly opts: ModelRegistryOptions) {
    this.#maxModels = opts.maxModels ?? 4;
  }

  /** Checkpoints in the LRU now. */
  get size(): number {
    return this.#models.size;
  }

  /** Checkpoints dropped from the LRU whose sessions wait for their last request to end. */
  get retiring(): number {
    return this.#retiring.size;
  }

  /**
   * The committed checkpoint or uploaded model a model name means for `tenantId`.
   * @throws ServeError 404 when the name is malformed, the job or model is not this tenant's, or
   *   the job has no checkpoint (at that step).
   */
  async resolve(tenantId: string, name: string): Promise<ServedSource> {
    const ref = parseModelName(name);
    const { db } = this.opts;
    if (ref.kind === "model") {
      const model = await getModel(db, tenantId, ref.modelId);
      if (!model) {
        throw modelNotFound(
          `The model ${name} does not exist: no uploaded model ${ref.modelId} for this key`,
        );
      }
      return { kind: "model", tenantId, model, createdAt: model.createdAt };
    }
    const job = await getJob(db, { tenantId, jobId: ref.jobId });
    if (!job) {
      throw modelNotFound(`The model ${name} does not exist: no job ${ref.jobId} for this key`);
    }
    const ck = ref.step === undefined
      ? await latestCheckpoint(db, ref.jobId)
      : await getCheckpoint(db, ref.jobId, ref.step);
    if (!ck) {
      throw modelNotFound(
        `The model ${name} does not exist: job ${ref.jobId} has no checkpoint${
          ref.step === undefined ? " yet" : ` at step ${ref.step}`
        }`,
      );
    }
    return { kind: "checkpoint", tenantId, checkpoint: ck, createdAt: ck.createdAt };
  }

  /**
   * The loaded model of a checkpoint or upload (loading it on a miss), held until `release` is
   * called: the caller calls it once the request's last choice has ended, or when it fails
   * before reaching the engine.
   * @throws IntegrityError when a stored file fails its SHA-256; HfFormatError for an unusable
   *   folder; ModelSourceError or LoraError for an adapter whose base cannot be loaded. None is
   *   cached.
   */
  async acquire(source: ServedSource): Promise<HeldModel> {
    // a rerun of a step replaces its row: the attempt and time tell the versions apart
    const ck = source.kind === "checkpoint" ? source.checkpoint : null;
    const key = ck
      ? `${ck.jobId}@${ck.step}/${ck.attempt}/${ck.createdAt.getTime()}`
      : `model:${source.kind === "model" ? source.model.id : ""}`;
    let entry = this.#models.get(key);
    if (entry) {
      this.#models.delete(key);
    } else {
      // Each loaded copy gets an engine key of its own: a copy evicted while requests still
      // decode on it and a fresh load of the same checkpoint are both alive for a while, and
      // the engine batches by this key — one batch must never mix the two copies' sessions (the
      // evicted copy's session is released when its last request ends).
      const copy = `${key}#${++this.#loads}`;
      entry = { model: this.#read(source, copy), holders: 0, evicted: false, freed: false };
      const failed = entry;
      entry.model.catch(() => {
        if (this.#models.get(key) === failed) this.#models.delete(key);
      });
    }
    this.#models.set(key, entry);
    entry.holders++;
    while (this.#models.size > this.#maxModels) {
      const [oldest, dropped] = this.#models.entries().next().value!;
      this.#models.delete(oldest);
      dropped.evicted = true;
      this.#retiring.add(dropped);
      void this.#free(dropped);
    }
    const held = entry;
    let model: ServedModel;
    try {
      model = await held.model;
    } catch (e) {
      held.holders--;
      void this.#free(held);
      throw e;
    }
    let released = false;
    return {
      model,
      release: () => {
        if (released) return;
        released = true;
        held.holders--;
        void this.#free(held);
      },
    };
  }

  /** Releases every cached session (at shutdown, once no request is in flight). */
  async close(): Promise<void> {
    for (const entry of this.#models.values()) entry.evicted = true;
    const all = [...this.#models.values(), ...this.#retiring];
    this.#models.clear();
    for (const entry of all) {
      entry.holders = 0;
      await this.#free(entry);
    }
  }

  /** Releases an evicted entry's session once nobody holds it. */
  async #free(entry: Entry): Promise<void> {
    if (!entry.evicted || entry.holders > 0 || entry.freed) return;
    entry.freed = true;
    this.#retiring.delete(entry);
    const model = await entry.model.catch(() => null);
    await model?.release?.().catch(() => {});
  }

  async #read(source: ServedSource, key: string): Promise<ServedModel> {
    const { store } = this.opts;
    let hf: HfModel, id: string, jobId: string | null = null, step: number | null = null;
    if (source.kind === "model") {
      const m = source.model;
      id = `model:${m.id}`;
      hf = await loadHfDirectory((name) => {
        const f = m.files.find((x) => x.name === name);
        return f ? store.get(f.key, { sha256: f.sha256 }) : Promise.resolve(null);
      });
    } else {
      const ck = source.checkpoint;
      id = `job:${ck.jobId}@${ck.step}`;
      jobId = ck.jobId;
      step = ck.step;
      const names = new Set(ck.files.map((f) => f.name));
      // Full weights (top level, or a LoRA checkpoint's merged/ folder), else adapter + base.
      const full = checkpointModelReader(names, (name) => readCheckpointFile(store, ck, name));
      if (full) hf = await loadHfDirectory(full);
      else if (names.has(ADAPTER_FILES.config)) {
        hf = await this.#mergedAdapter(source.tenantId, ck);
      } else {
        hf = await loadHfDirectory((name) =>
          names.has(name) ? readCheckpointFile(store, ck, name) : Promise.resolve(null)
        );
      }
    }
    const tokenizer = new Tokenizer(hf.tokenizer);
    const decode = await decodeModel(key, hf.config, hf.parameters, this.opts.sessions);
    const promptForm = promptFormOf(tokenizer);
    return {
      ...decode,
      id,
      jobId,
      step,
      tokenizer,
      promptForm,
      stopTokenIds: stopTokenIdsOf(tokenizer, promptForm, declaredEosTokenIds(hf)),
      createdAt: source.createdAt,
    };
  }

  /**
   * An adapter-only LoRA checkpoint as its base with the adapter merged in, resolved as the
   * trainer resolves a `job:<id>@<step>` base (model_source.ts `resolveModel`), reading only the
   * tenant's own checkpoints and uploads.
   */
  async #mergedAdapter(tenantId: string, ck: Checkpoint): Promise<HfModel> {
    const { db, store } = this.opts;
    const point = (c: Checkpoint | null): ResumePoint | null =>
      c && { step: c.step, files: c.files, read: (name) => readCheckpointFile(store, c, name) };
    const artifacts: ArtifactReader = {
      async checkpoint(jobId, step) {
        if (!/^[0-9a-f-]{36}$/.test(jobId) || !(await getJob(db, { tenantId, jobId }))) return null;
        return point(
          step === undefined
            ? await latestCheckpoint(db, jobId)
            : await getCheckpoint(db, jobId, step),
        );
      },
      async model(modelId) {
        const m = await getModel(db, tenantId, modelId);
        return m && {
          files: m.files,
          read: (name: string) => {
            const f = m.files.find((x) => x.name === name)!;
            return store.get(f.key, { sha256: f.sha256 });
          },
        };
      },
      // s3:// bases are read by workers only: the inference server reads no bucket keys
      readObject: () => Promise.resolve(null),
    };
    const job = await getJob(db, { tenantId, jobId: ck.jobId });
    // the job's environment (builtin bases take their vocabulary from it; an adapter's trainer
    // state names its own when it differs)
    const spec = job?.spec as { env?: { id?: unknown } } | undefined;
    const env = await resolveEnvironment(String(spec?.env?.id ?? "sokoban"));
    return await resolveModel(`job:${ck.jobId}@${ck.step}`, { env, seed: 0, artifacts });
  }

  /**
   * A job's skill library: the latest, or the one written at `step`; checked against its SHA-256.
   * @throws ServeError 400 (param `skills`) when the job has none (at that step).
   */
  async skillLibrary(
    jobId: string,
    step?: number,
  ): Promise<{ step: number; library: SkillLibrary }> {
    const row = await getSkillLibrary(this.opts.db, jobId, step);
    if (!row) {
      throw badRequest(
        `Cannot use skills as job ${jobId} must have a skill library${
          step === undefined ? "" : ` at step ${step}`
        }: it has none`,
        "skills",
      );
    }
    const key = `${row.jobId}@${row.step}/${row.sha256}`;
    let hit = this.#libraries.get(key);
    if (!hit) {
      hit = readSkillLibrary(this.opts.store, row).then((json) => SkillLibrary.fromJSON(json));
      hit.catch(() => this.#libraries.delete(key));
      this.#libraries.set(key, hit);
      while (this.#libraries.size > 4 * this.#maxModels) {
        this.#libraries.delete(this.#libraries.keys().next().value!);
      }
    }
    return { step: row.step, library: await hit };
  }
}
