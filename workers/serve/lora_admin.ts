/**
 * Models loaded by name at runtime, so a trainer can keep this server on its current policy
 * (workers/serve/README.md, "Remote rollout engines"):
 *
 * | method | path                      | body                                   | answer              |
 * |--------|---------------------------|----------------------------------------|---------------------|
 * | POST   | /v1/load_checkpoint       | `{model_name, checkpoint_path}`        | 200 text; replaces  |
 * | POST   | /v1/load_lora_adapter     | `{lora_name, lora_path, base_model_name?}` | 200 text; 400 if loaded |
 * | POST   | /v1/unload_lora_adapter   | `{lora_name}`                          | 200 text; 404 if not |
 *
 * `load_lora_adapter` / `unload_lora_adapter` take vLLM's JSON shapes and answer as vLLM does
 * (`Success: LoRA adapter '<name>' added successfully.`); `load_checkpoint` is ours (vLLM's
 * OpenAI server has no full-weight reload). Paths are folders of this server's object store,
 * `s3://<bucket>/tenants/<tenant id>/…/` (ending in `/`): a Hugging Face model folder, or a PEFT
 * adapter folder (`adapter_config.json`, `adapter_model.safetensors`). A tenant reaches only its
 * own prefix and its own names. An adapter is merged (W + (α/r)·B·A) onto a full model loaded
 * earlier by name: `base_model_name` (our extension, since vLLM serves one base), else the
 * adapter config's `base_model_name_or_path`. `unload_lora_adapter` unloads any named model.
 *
 * A request names a loaded model in `model`; the answer's `model` is that name. Named models live
 * in memory until unloaded, replaced, evicted or the server stops: at most `maxModels` over all
 * tenants (`SERVE_MAX_NAMED_MODELS`, default 8); loading one more evicts the least recently used
 * (loaded or asked for). An evicted name stays registered: the next request for it loads it again
 * from its folder (an adapter onto the weights its base name held when it was loaded) and then
 * answers, as vLLM reloads an adapter that left its LoRA cache from its `lora_path`; only
 * `unload_lora_adapter` (or replacing it) drops a name. A request holding a model keeps its
 * session alive past an unload or an eviction until its last token.
 *
 * Names registered (loaded or evicted) are bounded per tenant, `maxNames`
 * (`SERVE_MAX_REGISTERED_NAMES`, default 256): an evicted name costs no weights, only its recipe,
 * but without a bound a client could register names without end. A load under a new name when
 * the tenant has that many is a 400 (code `named_model_limit_exceeded`) and registers nothing; a
 * load under a name already registered replaces it as before.
 */
import type { Hono } from "hono";
import { z } from "zod";
import { type ArtifactStore, type Database, getJob, getModel } from "../../jobs/mod.ts";
import type { SessionCache } from "../engine/mod.ts";
import {
  ADAPTER_FILES,
  adapterConfigFromJson,
  declaredEosTokenIds,
  firstNonFinite,
  HfFormatError,
  type HfModel,
  loadHfDirectory,
  LoraError,
  mergeLora,
  parameterSpecs,
  promptFormOf,
  readAdapter,
  SafetensorsError,
  stopTokenIdsOf,
  Tokenizer,
  TokenizerError,
} from "../model/mod.ts";
import type { ServeAuthEnv } from "./auth.ts";
import { badRequest, fromZod, modelNotFound, ServeError } from "./errors.ts";
import { decodeModel, type HeldModel, type ServedModel } from "./models.ts";

/** Paths of this module's routes (for the app's 405 table). */
export const ADMIN_ROUTES = [
  "/v1/load_checkpoint",
  "/v1/load_lora_adapter",
  "/v1/unload_lora_adapter",
] as const;

const name = z.string().min(1).max(200);
const path = z.string().min(1).max(2048);

/** Prefixes of the names the server resolves itself (`job:<id>@<step>`, `model:…`, `builtin:…`). */
export const RESERVED_MODEL_NAME_PREFIXES = ["job:", "model:", "builtin:"] as const;

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028-\u202e\u2066-\u2069]/;

/**
 * The name a model is loaded under: 1–200 characters, no control characters (C0/C1, line
 * separators, bidirectional overrides), no whitespace at either end (` job:x` and `x ` would be
 * names apart from `job:x` and `x` that read the same), and not starting with a reserved prefix in
 * any case (`JOB:x` too), which would shadow a job's or a registered model's weights under their
 * own name.
 */
const loadName = name
  .refine((n) => !CONTROL.test(n), { message: "must not hold control characters" })
  .refine((n) => !/^\s|\s$/u.test(n), { message: "must not start or end with whitespace" })
  .refine(
    (n) => !RESERVED_MODEL_NAME_PREFIXES.some((p) => n.toLowerCase().startsWith(p)),
    {
      message: `must not start with ${
        RESERVED_MODEL_NAME_PREFIXES.join(", ")
      } in any case (the server resolves those names itself)`,
    },
  );

const LoadCheckpointSchema = z.object({ model_name: loadName, checkpoint_path: path }).strict();
const LoadAdapterSchema = z.object({
  lora_name: loadName,
  lora_path: path,
  base_model_name: name.optional(),
  /** vLLM's field: replace an adapter of that name (accepted for compatibility). */
  load_inplace: z.boolean().optional(),
}).strict();
const UnloadAdapterSchema = z.object({
  lora_name: name,
  lora_int_id: z.number().int().optional(),
}).strict();

/** The weights file of a Hugging Face folder, for messages. */
const HF_WEIGHTS = "model.safetensors";

/** Named models kept loaded by default (`SERVE_MAX_NAMED_MODELS`). */
export const DEFAULT_MAX_NAMED_MODELS = 8;

/**
 * Names a tenant may have registered, loaded or evicted, by default (`SERVE_MAX_REGISTERED_NAMES`):
 * 256, the most `SERVE_MAX_NAMED_MODELS` allows, so one tenant can always fill every loaded slot;
 * far more than a trainer uses (one policy name, or one per version it keeps), and an evicted
 * name holds only its recipe (two folder paths, its origins), a few hundred bytes.
 */
export const DEFAULT_MAX_REGISTERED_NAMES = 256;

/**
 * Where a named model's weights come from, kept while the name is registered so an evicted
 * model loads again on demand: a Hugging Face folder, or an adapter folder merged onto the full
 * model its base name held when it was loaded (`base`, that model's own recipe); `origins`, the
 * jobs and uploaded models those folders belong to (see {@link Origin}).
 */
type Recipe =
  & ({ kind: "checkpoint"; at: string } | {
    kind: "adapter";
    at: string;
    baseName: string;
    base: Recipe & { kind: "checkpoint" };
  })
  & { origins: Origin[]; loadedAt: Date };

/**
 * A job or uploaded model whose folder a named model was loaded from (`…/jobs/<id>/…` or
 * `…/models/<id>/…`), recorded when it existed at load: once it is deleted, so is the name.
 */
interface Origin {
  kind: "job" | "model";
  id: string;
}

/** Names unloaded with what they were loaded from that a request still hears about. */
const ORPHANS_KEPT = 256;

/**
 * A load again of an evicted name under way: the requests waiting for it (`waiters`, each held
 * on the entry the moment it is set, so no eviction between the load and the request frees it),
 * and that entry once set.
 */
interface Reload {
  done: Promise<Entry | null>;
  waiters: number;
  entry: Entry | null;
}

/** One named model and the requests holding it. */
interface Entry {
  tenantId: string;
  name: string;
  model: ServedModel;
  /** Full weights (null for a merged adapter: an adapter applies to a full model only). */
  hf: HfModel | null;
  /** How it was loaded: its folders, their jobs and models (`origins`), when. */
  recipe: Recipe;
  holders: number;
  unloaded: boolean;
  freed: boolean;
}

/** The 404 message for the name `modelName` unloaded because `gone` was deleted. */
function orphanMessage(modelName: string, gone: Origin): string {
  return `The model '${modelName}' does not exist: it was unloaded as the ${gone.kind} it was loaded from (${gone.id}) has been deleted`;
}

/** Models loaded by name, per tenant (see module doc). */
export class NamedModels {
  readonly #tenants = new Map<string, Map<string, Entry>>();
  /** Names evicted to make room (not unloaded): their recipes, per tenant. */
  readonly #evicted = new Map<string, Map<string, Recipe>>();
  /** Loads again of evicted names under way, by `tenant/name`. */
  readonly #reloading = new Map<string, Reload>();
  /** Every loaded entry, least recently used first. */
  readonly #recent = new Set<Entry>();
  /**
   * Names unloaded because what they were loaded from was deleted, or dropped because an evicted
   * name's folder no longer holds it (`tenant/name` → the 404's message), so that every later
   * request for one says why; the last {@link ORPHANS_KEPT}, dropped when the name is loaded again.
   */
  readonly #orphans = new Map<string, string>();
  #loads = 0;

  constructor(
    private readonly opts: {
      store: ArtifactStore;
      /**
       * The job database: a name loaded from a job's or uploaded model's folder is unloaded once
       * that job or model is deleted. Absent: names are never checked against it.
       */
      db?: Database;
      sessions: SessionCache;
      /**
       * Most named models loaded at once, over all tenants (default
       * {@link DEFAULT_MAX_NAMED_MODELS}).
       */
      maxModels?: number;
      /**
       * Most names one tenant has registered, loaded or evicted (default
       * {@link DEFAULT_MAX_REGISTERED_NAMES}).
       */
      maxNames?: number;
    },
  ) {}

  /** Names of the models loaded now, least recently used first (`tenant/name`). */
  loaded(): string[] {
    return [...this.#recent].map((e) => `${e.tenantId}/${e.name}`);
  }

  /**
   * The tenant's named models, loaded or evicted (which load again on their next request), in
   * the order they were loaded: each name and when it was loaded (for `GET /v1/models`; nothing
   * is held and no use is counted).
   */
  async list(tenantId: string): Promise<{ name: string; createdAt: Date }[]> {
    const out: { name: string; createdAt: Date }[] = [];
    for (const e of [...(this.#tenants.get(tenantId)?.values() ?? [])]) {
      if (await this.#unloadIfOrphaned(e) === undefined) {
        out.push({ name: e.name, createdAt: e.recipe.loadedAt });
      }
    }
    for (const [name, recipe] of [...(this.#evicted.get(tenantId) ?? [])]) {
      if (await this.#goneOrigin(tenantId, name, recipe) === undefined) {
        out.push({ name, createdAt: recipe.loadedAt });
      }
    }
    return out.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  }

  /**
   * The tenant's model named `name`, held until `release` (null: no such name). A name evicted
   * to make room for others is loaded again from its folder first, as vLLM loads an adapter
   * that left its LoRA cache again from its `lora_path` (concurrent requests share one load).
   * @throws ServeError 404 (`model_not_found`) when the job or uploaded model it was loaded from
   *   has been deleted since (the name is unloaded then: `DELETE /v1/jobs/{id}` removes what the
   *   job made, its weights served under a name included), or when an evicted model's folder no
   *   longer holds it (the name is then dropped).
   */
  async acquire(tenantId: string, modelName: string): Promise<HeldModel | null> {
    const orphaned = (gone: Origin) => modelNotFound(orphanMessage(modelName, gone));
    let entry = this.#tenants.get(tenantId)?.get(modelName);
    if (!entry) {
      const why = this.whyGone(tenantId, modelName);
      if (why) throw modelNotFound(why);
      const recipe = this.#evicted.get(tenantId)?.get(modelName);
      if (!recipe) return null;
      const goneOrigin = await this.#goneOrigin(tenantId, modelName, recipe);
      if (goneOrigin) throw orphaned(goneOrigin);
      const key = `${tenantId}/${modelName}`;
      let reload = this.#reloading.get(key);
      if (reload?.entry?.freed) reload = undefined; // set, evicted and released already
      if (!reload) {
        const r: Reload = { done: Promise.resolve(null), waiters: 0, entry: null };
        r.done = this.#reload(tenantId, modelName, recipe, r).finally(() => {
          if (this.#reloading.get(key) === r) this.#reloading.delete(key);
        });
        this.#reloading.set(key, reload = r);
      }
      if (reload.entry) reload.entry.holders++;
      else reload.waiters++;
      const reloaded = await reload.done;
      // Held already (see Reload); null: unloaded or replaced while loading again.
      if (reloaded) return this.#held(reloaded);
      entry = this.#tenants.get(tenantId)?.get(modelName);
      if (!entry) return null;
    }
    const gone = await this.#unloadIfOrphaned(entry);
    if (gone) throw orphaned(gone);
    // Replaced or unloaded while the database answered: take what the name means now.
    entry = this.#tenants.get(tenantId)?.get(modelName);
    if (!entry) return null;
    entry.holders++;
    return this.#held(entry);
  }

  /**
   * Why the tenant's name `modelName` is no longer served, when it was unloaded because what it
   * was loaded from was deleted, or dropped because its folder no longer held it once evicted
   * (the message of the 404 its requests get); undefined otherwise.
   */
  whyGone(tenantId: string, modelName: string): string | undefined {
    return this.#orphans.get(`${tenantId}/${modelName}`);
  }

  /** `entry` (its holder already counted) as a request's handle; the most recently used now. */
  #held(entry: Entry): HeldModel {
    if (this.#recent.delete(entry)) this.#recent.add(entry); // most recently used last
    let released = false;
    return {
      model: entry.model,
      release: () => {
        if (released) return;
        released = true;
        entry.holders--;
        void this.#free(entry);
      },
    };
  }

  /**
   * Loads a Hugging Face folder under `modelName` (replacing a model of that name).
   * @throws ServeError 400 at `checkpoint_path` for a path outside the tenant's prefix or a folder
   *   that is no model (no config.json, weights missing or of the wrong shape); 404 at
   *   `checkpoint_path` when its files vanish while loading (the job was deleted); 400 at
   *   `model_name` when the name is new and the tenant has `maxNames` registered already.
   */
  async loadCheckpoint(tenantId: string, modelName: string, at: string): Promise<void> {
    this.#checkRoom(tenantId, modelName, "model_name");
    const hf = await this.#fullModel(tenantId, at);
    const origins = await this.#origins(tenantId, at);
    const recipe: Recipe = { kind: "checkpoint", at, origins, loadedAt: new Date() };
    const served = await this.#served(modelName, hf, "checkpoint_path");
    await this.#register(tenantId, modelName, served, hf, recipe, "model_name");
  }

  /**
   * Loads a PEFT adapter under `loraName`, merged onto the tenant's full model `baseName`
   * (default: the adapter's `base_model_name_or_path`).
   * @throws ServeError 400 when the name is taken (unless `inplace`), the name is new and the
   *   tenant has `maxNames` registered already, the base is not loaded or the path is outside the
   *   tenant's prefix; LoraError for an adapter that does not fit.
   */
  async loadAdapter(
    tenantId: string,
    loraName: string,
    at: string,
    options: { baseName?: string; inplace?: boolean } = {},
  ): Promise<void> {
    if (
      !options.inplace &&
      (this.#tenants.get(tenantId)?.has(loraName) || this.#evicted.get(tenantId)?.has(loraName))
    ) {
      throw badRequest(`The lora adapter '${loraName}' has already been loaded.`, "lora_name");
    }
    this.#checkRoom(tenantId, loraName, "lora_name");
    const read = await this.#reader(tenantId, at, "lora_path");
    const [config, weights] = await Promise.all([
      read(ADAPTER_FILES.config),
      read(ADAPTER_FILES.weights),
    ]);
    if (!config || !weights) {
      throw badRequest(
        `Cannot load the adapter as lora_path must hold ${ADAPTER_FILES.config} and ${ADAPTER_FILES.weights}: it does not`,
        "lora_path",
      );
    }
    const refuse = (file: string, why: string) =>
      badRequest(`Cannot load the adapter as lora_path's ${file} ${why}`, "lora_path");
    let configJson: unknown;
    try {
      configJson = JSON.parse(new TextDecoder().decode(config));
    } catch (e) {
      throw refuse(ADAPTER_FILES.config, `must be a JSON object: ${(e as Error).message}`);
    }
    if (configJson === null || typeof configJson !== "object" || Array.isArray(configJson)) {
      throw refuse(
        ADAPTER_FILES.config,
        `must be a JSON object: it is ${Array.isArray(configJson) ? "a list" : String(configJson)}`,
      );
    }
    try {
      adapterConfigFromJson(configJson as Record<string, unknown>);
    } catch (e) {
      if (!(e instanceof LoraError)) throw e;
      throw badRequest(`Cannot load the adapter from lora_path: ${e.message}`, "lora_path");
    }
    const declared = (configJson as Record<string, unknown>).base_model_name_or_path;
    if (options.baseName === undefined && (typeof declared !== "string" || declared === "")) {
      throw refuse(
        ADAPTER_FILES.config,
        `must name its base model in base_model_name_or_path, or the request must give base_model_name: it names none`,
      );
    }
    const baseName = options.baseName ?? (declared as string);
    // an evicted base is loaded again first, as a request for it would
    (await this.acquire(tenantId, baseName).catch(() => null))?.release();
    const base = this.#tenants.get(tenantId)?.get(baseName);
    if (!base?.hf || base.recipe.kind !== "checkpoint") {
      throw badRequest(
        `Cannot load the adapter as its base model must be a full model loaded by name (POST /v1/load_checkpoint): ${
          JSON.stringify(baseName)
        } is not`,
        options.baseName !== undefined ? "base_model_name" : "lora_path",
      );
    }
    const hf = mergedAdapter(base.hf, config, weights);
    const origins = [...await this.#origins(tenantId, at), ...base.recipe.origins];
    const recipe: Recipe = {
      kind: "adapter",
      at,
      baseName,
      base: base.recipe,
      origins,
      loadedAt: new Date(),
    };
    const served = await this.#served(loraName, hf, "lora_path");
    await this.#register(tenantId, loraName, served, null, recipe, "lora_name");
  }

  /**
   * Refuses a new name when the tenant has `maxNames` registered (loaded or evicted); a name
   * already registered may always be loaded again.
   * @throws ServeError 400 at `param` (code `named_model_limit_exceeded`).
   */
  #checkRoom(tenantId: string, modelName: string, param: string): void {
    const loaded = this.#tenants.get(tenantId), evicted = this.#evicted.get(tenantId);
    if (loaded?.has(modelName) || evicted?.has(modelName)) return;
    const max = this.opts.maxNames ?? DEFAULT_MAX_REGISTERED_NAMES;
    const registered = (loaded?.size ?? 0) + (evicted?.size ?? 0);
    if (registered < max) return;
    throw badRequest(
      `Cannot load '${modelName}' as the names a tenant has registered (loaded or evicted) must be at most ${max} (SERVE_MAX_REGISTERED_NAMES): current count is ${registered}. Free one with POST /v1/unload_lora_adapter {"lora_name": "<name>"}, or load under a name already registered (which replaces it).`,
      param,
      "named_model_limit_exceeded",
    );
  }

  /**
   * Sets `model` under `modelName` once it is loaded, checking the room again (another load may
   * have registered a name meanwhile); refused, the model's session is released and nothing
   * registered changes.
   * @throws ServeError 400 at `param` (see `#checkRoom`).
   */
  async #register(
    tenantId: string,
    modelName: string,
    model: ServedModel,
    hf: HfModel | null,
    recipe: Recipe,
    param: string,
  ): Promise<void> {
    try {
      this.#checkRoom(tenantId, modelName, param);
    } catch (e) {
      await model.release?.().catch(() => {});
      throw e;
    }
    this.#set(tenantId, modelName, model, hf, recipe);
  }

  /** Unloads a named model, loaded or evicted; false when the tenant has none of that name. */
  unload(tenantId: string, modelName: string): boolean {
    const evicted = this.#evicted.get(tenantId)?.delete(modelName) ?? false;
    const models = this.#tenants.get(tenantId);
    const entry = models?.get(modelName);
    if (!entry) return evicted;
    models!.delete(modelName);
    this.#recent.delete(entry);
    entry.unloaded = true;
    void this.#free(entry);
    return true;
  }

  /** Releases every session (at shutdown, once no request is in flight). */
  async close(): Promise<void> {
    for (const models of this.#tenants.values()) {
      for (const entry of models.values()) {
        entry.unloaded = true;
        entry.holders = 0;
        await this.#free(entry);
      }
    }
    this.#tenants.clear();
    this.#evicted.clear();
    this.#recent.clear();
  }

  /**
   * Loads an evicted name again from `recipe` (an adapter onto its base's weights: the base's
   * loaded copy when its name still holds that recipe, else read again), unless it was unloaded
   * or replaced meanwhile (then null). The entry is set with one holder per waiter of `reload`.
   * @throws ServeError 404 when the folder no longer holds the model (the name is dropped).
   */
  async #reload(
    tenantId: string,
    modelName: string,
    recipe: Recipe,
    reload: Reload,
  ): Promise<Entry | null> {
    let hf: HfModel;
    try {
      if (recipe.kind === "checkpoint") hf = await this.#fullModel(tenantId, recipe.at);
      else {
        const loaded = this.#tenants.get(tenantId)?.get(recipe.baseName);
        const base = loaded?.recipe === recipe.base && loaded.hf
          ? loaded.hf
          : await this.#fullModel(tenantId, recipe.base.at);
        const read = await this.#reader(tenantId, recipe.at, "lora_path");
        const [config, weights] = await Promise.all([
          read(ADAPTER_FILES.config),
          read(ADAPTER_FILES.weights),
        ]);
        if (!config || !weights) throw badRequest("the adapter files are gone", "lora_path");
        hf = mergedAdapter(base, config, weights);
      }
    } catch (e) {
      if (!(e instanceof ServeError) || (e.status !== 400 && e.status !== 404)) throw e;
      const message =
        `The model '${modelName}' was evicted and cannot be loaded again from ${recipe.at}: ${e.message}`;
      if (this.#evicted.get(tenantId)?.get(modelName) === recipe) {
        this.#evicted.get(tenantId)!.delete(modelName);
        this.#orphan(`${tenantId}/${modelName}`, message);
      }
      throw modelNotFound(message);
    }
    if (this.#evicted.get(tenantId)?.get(modelName) !== recipe) return null; // unloaded or replaced
    const model = await this.#served(
      modelName,
      hf,
      recipe.kind === "checkpoint" ? "checkpoint_path" : "lora_path",
    );
    if (this.#evicted.get(tenantId)?.get(modelName) !== recipe) {
      await model.release?.().catch(() => {});
      return null;
    }
    const hfKept = recipe.kind === "checkpoint" ? hf : null;
    reload.entry = this.#set(tenantId, modelName, model, hfKept, recipe, reload.waiters);
    return reload.entry;
  }

  /**
   * A Hugging Face folder's model.
   * @throws ServeError 400 at `checkpoint_path` (see {@link loadCheckpoint}).
   */
  async #fullModel(tenantId: string, at: string): Promise<HfModel> {
    const read = await this.#reader(tenantId, at, "checkpoint_path");
    try {
      return await loadHfDirectory(read);
    } catch (e) {
      if (
        !(e instanceof HfFormatError || e instanceof SafetensorsError ||
          e instanceof TokenizerError)
      ) throw e;
      throw badRequest(
        `Cannot load checkpoint_path as it must be a Hugging Face model folder: ${
          e instanceof SafetensorsError ? `${HF_WEIGHTS}: ` : ""
        }${e.message}`,
        "checkpoint_path",
      );
    }
  }

  /**
   * The job or uploaded model whose folder `at` is in, when it exists now (an empty list for a
   * folder no job or model owns: nothing to follow).
   */
  async #origins(tenantId: string, at: string): Promise<Origin[]> {
    const { db, store } = this.opts;
    // `at` passed #reader: it starts with the tenant's own prefix.
    const own = `s3://${store.bucket}/tenants/${tenantId}/`;
    const m = /^(jobs|models)\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\//
      .exec(at.slice(own.length));
    if (!db || !m) return [];
    const origin: Origin = { kind: m[1] === "jobs" ? "job" : "model", id: m[2] };
    return await this.#exists(tenantId, origin) ? [origin] : [];
  }

  async #exists(tenantId: string, o: Origin): Promise<boolean> {
    const db = this.opts.db!;
    return o.kind === "job"
      ? (await getJob(db, { tenantId, jobId: o.id })) !== null
      : (await getModel(db, tenantId, o.id)) !== null;
  }

  /** Unloads `entry` when one of its origins is gone (being deleted counts); that origin. */
  async #unloadIfOrphaned(entry: Entry): Promise<Origin | undefined> {
    for (const o of entry.recipe.origins) {
      if (await this.#exists(entry.tenantId, o)) continue;
      if (this.#tenants.get(entry.tenantId)?.get(entry.name) === entry) {
        this.unload(entry.tenantId, entry.name);
        this.#orphan(`${entry.tenantId}/${entry.name}`, orphanMessage(entry.name, o));
      }
      return o;
    }
    return undefined;
  }

  /**
   * The origin of the evicted name `modelName` (loaded by `recipe`) that has been deleted, if
   * any: the name is then dropped and remembered as orphaned.
   */
  async #goneOrigin(
    tenantId: string,
    modelName: string,
    recipe: Recipe,
  ): Promise<Origin | undefined> {
    for (const o of recipe.origins) {
      if (await this.#exists(tenantId, o)) continue;
      if (this.#evicted.get(tenantId)?.get(modelName) === recipe) {
        this.#evicted.get(tenantId)!.delete(modelName);
        this.#orphan(`${tenantId}/${modelName}`, orphanMessage(modelName, o));
      }
      return o;
    }
    return undefined;
  }

  /** Remembers `key` (`tenant/name`) as no longer served, for the reason `message`. */
  #orphan(key: string, message: string): void {
    this.#orphans.delete(key);
    this.#orphans.set(key, message);
    if (this.#orphans.size > ORPHANS_KEPT) {
      this.#orphans.delete(this.#orphans.keys().next().value!);
    }
  }

  #set(
    tenantId: string,
    modelName: string,
    model: ServedModel,
    hf: HfModel | null,
    recipe: Recipe,
    holders = 0,
  ): Entry {
    this.#evicted.get(tenantId)?.delete(modelName);
    let models = this.#tenants.get(tenantId);
    if (!models) this.#tenants.set(tenantId, models = new Map());
    this.#orphans.delete(`${tenantId}/${modelName}`);
    const old = models.get(modelName);
    const entry: Entry = {
      tenantId,
      name: modelName,
      model,
      hf,
      recipe,
      holders,
      unloaded: false,
      freed: false,
    };
    models.set(modelName, entry);
    this.#recent.add(entry);
    if (old) {
      this.#recent.delete(old);
      old.unloaded = true;
      void this.#free(old);
    }
    const max = Math.max(1, this.opts.maxModels ?? DEFAULT_MAX_NAMED_MODELS);
    for (const victim of this.#recent) {
      if (this.#recent.size <= max) break;
      if (victim === entry) continue;
      this.unload(victim.tenantId, victim.name);
      let evicted = this.#evicted.get(victim.tenantId);
      if (!evicted) this.#evicted.set(victim.tenantId, evicted = new Map());
      evicted.set(victim.name, victim.recipe);
    }
    return entry;
  }

  async #free(entry: Entry): Promise<void> {
    if (!entry.unloaded || entry.holders > 0 || entry.freed) return;
    entry.freed = true;
    await entry.model.release?.().catch(() => {});
  }

  /**
   * A decode model of `hf` under `modelName`.
   * @throws ServeError 400 at `param` when its tokenizer.json is no tokenizer.
   */
  async #served(modelName: string, hf: HfModel, param: string): Promise<ServedModel> {
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(hf.tokenizer);
    } catch (e) {
      throw badRequest(
        `Cannot load ${param} as its tokenizer.json must be a tokenizer: ${(e as Error).message}`,
        param,
      );
    }
    const key = `named:${modelName}#${++this.#loads}`;
    const decode = await decodeModel(key, hf.config, hf.parameters, this.opts.sessions);
    const promptForm = promptFormOf(tokenizer);
    return {
      ...decode,
      id: modelName,
      jobId: "",
      step: -1,
      tokenizer,
      promptForm,
      stopTokenIds: stopTokenIdsOf(tokenizer, promptForm, declaredEosTokenIds(hf)),
      createdAt: new Date(),
    };
  }

  /**
   * A reader of the folder `at` (`s3://<bucket>/tenants/<tenant id>/…/`).
   * @throws ServeError 400 at `param` for another bucket, another tenant's prefix or an empty
   *   folder; the reader throws ServeError 404 at `param` for a listed file gone since.
   */
  async #reader(tenantId: string, at: string, param: string) {
    const { store } = this.opts;
    const own = `s3://${store.bucket}/tenants/${tenantId}/`;
    if (!at.startsWith(own) || !at.endsWith("/") || at.includes("/../") || at.includes("//", 5)) {
      throw badRequest(
        `Cannot load ${param} as it must be a folder under ${own} (ending in /, no .. or empty segment): current value is ${
          JSON.stringify(at.slice(0, 300))
        }`,
        param,
      );
    }
    const prefix = at.slice(`s3://${store.bucket}/`.length);
    const keys = new Set(await store.list(prefix));
    if (keys.size === 0) {
      throw badRequest(`Cannot load ${param} as the folder must hold files: it is empty`, param);
    }
    return async (file: string) => {
      if (!keys.has(prefix + file)) return null;
      try {
        return await store.get(prefix + file);
      } catch (e) {
        if ((e as { name?: string }).name !== "NoSuchKey") throw e;
        throw new ServeError(
          404,
          "invalid_request_error",
          `Cannot load ${param} as its file ${file} no longer exists (the folder was deleted while loading)`,
          { param, code: "checkpoint_not_found", cause: e },
        );
      }
    };
  }
}

/**
 * `base` with a PEFT adapter (its `adapter_config.json` and `adapter_model.safetensors` bytes)
 * merged in: W + (α/r)·B·A.
 * @throws ServeError 400 at `lora_path` for an adapter that does not fit the base (LoraError's
 *   message names the file and field) or weights that are no safetensors file.
 */
function mergedAdapter(base: HfModel, config: Uint8Array, weights: Uint8Array): HfModel {
  const c = base.config;
  let adapter: ReturnType<typeof readAdapter>;
  try {
    adapter = readAdapter(c, config, weights);
  } catch (e) {
    if (e instanceof LoraError) {
      throw badRequest(
        `Cannot load the adapter as lora_path's files do not fit: ${e.message}`,
        "lora_path",
      );
    }
    if (e instanceof SafetensorsError) {
      throw badRequest(
        `Cannot load the adapter as lora_path's ${ADAPTER_FILES.weights} must be a safetensors file: ${e.message}`,
        "lora_path",
      );
    }
    throw e;
  }
  const params = new Map([...base.parameters, ...adapter.parameters]);
  const merged = mergeLora(c, params, adapter.lora, parameterSpecs(c));
  // Finite factors can still overflow float32 once multiplied and scaled by α/r.
  for (const [name, data] of merged) {
    if (data === base.parameters.get(name)) continue; // not targeted: checked at its load
    const bad = firstNonFinite(data);
    if (bad >= 0) {
      throw badRequest(
        `Cannot load the adapter as lora_path's ${ADAPTER_FILES.weights} merged onto its base makes ${name} non-finite: element ${bad} is ${
          data[bad]
        }`,
        "lora_path",
      );
    }
  }
  return { ...base, parameters: merged };
}

/** Mounts the routes of the module doc on `app` (after its auth middleware). */
export function mountLoraAdmin(app: Hono<ServeAuthEnv>, named: NamedModels): void {
  const body = async <T extends z.ZodType>(c: { req: { text(): Promise<string> } }, s: T) => {
    let json: unknown;
    try {
      json = JSON.parse(await c.req.text());
    } catch (e) {
      throw badRequest(`We could not parse the JSON body of your request: ${e}`, null);
    }
    const r = s.safeParse(json);
    if (!r.success) throw fromZod(r.error);
    return r.data as z.output<T>;
  };
  app.post("/v1/load_checkpoint", async (c) => {
    const r = await body(c, LoadCheckpointSchema);
    await named.loadCheckpoint(c.get("tenant").id, r.model_name, r.checkpoint_path);
    return c.text(`Success: checkpoint '${r.model_name}' loaded successfully.`);
  });
  app.post("/v1/load_lora_adapter", async (c) => {
    const r = await body(c, LoadAdapterSchema);
    await named.loadAdapter(c.get("tenant").id, r.lora_name, r.lora_path, {
      baseName: r.base_model_name,
      inplace: r.load_inplace,
    });
    return c.text(`Success: LoRA adapter '${r.lora_name}' added successfully.`);
  });
  app.post("/v1/unload_lora_adapter", async (c) => {
    const r = await body(c, UnloadAdapterSchema);
    if (!named.unload(c.get("tenant").id, r.lora_name)) {
      throw new ServeError(
        404,
        "invalid_request_error",
        `The lora adapter '${r.lora_name}' cannot be found.`,
        { param: "lora_name", code: "model_not_found" },
      );
    }
    return c.text(`Success: LoRA adapter '${r.lora_name}' removed successfully.`);
  });
}
