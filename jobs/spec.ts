/**
 * The JobSpec: the one zod schema of a training job (README.md, "The JobSpec"), the single source
 * of truth for the API's validation, the OpenAPI document and the worker's configuration.
 *
 * Every field has a default, so `{ "env": { "id": "sokoban" } }` is a complete job. Every object is
 * `.strict()` (an unknown field is a validation error, not silently dropped) and every number,
 * string and collection is bounded. Field names are snake_case because they are the wire format.
 */
import { z } from "zod";
import { outboundUrlSyntaxProblem } from "./outbound_url.ts";

/**
 * Training methods, the paper's arms (workers/seed/README.md, Arms): `grpo` episode-level
 * advantages only; `gigpo` episode- and step-level advantages (GiGPO); `seed` episode-level
 * advantages plus L_opd (SEED as the authors' launchers run it); `sft` only warms up. `grpo` and
 * `gigpo` are the SEED pipeline with λ_opd = 0 and no analysis.
 */
export const METHODS = ["seed", "grpo", "gigpo", "sft"] as const;
/** A training method (see {@link METHODS}). */
export type Method = (typeof METHODS)[number];

/** Advantage estimators (JobSpec `advantage.estimator`; workers/seed/advantage.ts). */
export const ESTIMATORS = ["grpo", "gigpo"] as const;
/** Group normalisations (JobSpec `advantage.norm`). */
export const NORMS = ["mean_std", "mean"] as const;
/** Who writes the skills of a `seed` job (JobSpec `seed.skill_source`). */
export const SKILL_SOURCES = ["policy", "reference"] as const;

/** Devices a job can require; a worker only claims jobs of its own device. */
export const DEVICES = ["cpu", "gpu"] as const;
/** A worker device class (see {@link DEVICES}). */
export type Device = (typeof DEVICES)[number];

/** Evaluation splits, mirroring `workers/envs/types.ts` (jobs/ never imports workers/). */
export const EVAL_SPLITS = ["train", "test_seen", "test_unseen"] as const;

/** Lowercase identifier: a letter, then letters, digits, `_` or `-`; at most 64 characters. */
export const ID_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;

/**
 * After `s3://bucket/`: a plain relative key — no leading `/`, no empty segment (`//`) and no `..`
 * segment (the worker refuses those too; checked here so the submit is the 4xx).
 */
const PLAIN_KEY = String.raw`(?!\/)(?![^\s]*\/\/)(?!(?:[^\s]*\/)?\.\.(?:\/|$))`;
/** `s3://bucket/prefix/` — a Hugging Face model folder (the prefix ends with `/`). */
const S3_PREFIX_PATTERN = new RegExp(
  String.raw`^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/${PLAIN_KEY}(?:[^\s]*\/)?$`,
);
/** `s3://bucket/key` — a single object. */
const S3_OBJECT_PATTERN = new RegExp(
  String.raw`^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/${PLAIN_KEY}[^\s]*[^\s/]$`,
);
/**
 * `job:<uuid>` or `job:<uuid>@<step>` — a checkpoint of an earlier job (latest when no step); group
 * 1 is the job's id.
 */
export const JOB_REF_PATTERN =
  /^job:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:@(?:0|[1-9][0-9]{0,8}))?$/;
/**
 * Most adapter-only LoRA checkpoints (a `model.lora` job without `save_merged`) loaded in a row
 * to build one model, the loaded checkpoint's own included: each applies to its job's
 * `model.base`, which may be another. The worker and the inference server refuse a longer chain
 * (workers/seed/run/model_source.ts), and the API refuses to queue a job on one, or an
 * adapter-only job on a chain of exactly this many, whose own checkpoints would make one
 * (jobs/queue.ts `submitJob` with `requireBase`).
 */
export const MAX_ADAPTER_CHAIN = 8;
/** `model:<uuid>` — a model uploaded with `POST /v1/models` (README.md, "Bring your own model"). */
export const MODEL_REF_PATTERN =
  /^model:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** Linear projections a LoRA adapter can target (PEFT's module names of Llama/Qwen decoders). */
export const LORA_TARGET_MODULES = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
] as const;
/** A LoRA target module (see {@link LORA_TARGET_MODULES}). */
export type LoraTargetModule = (typeof LORA_TARGET_MODULES)[number];

/** Largest accepted `env.options` object, in characters of its JSON text. */
export const MAX_ENV_OPTIONS_CHARS = 16_384;

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/**
 * `optim.loss_aggregation` values: `micro_batch_token_mean` (token means per micro-batch, averaged
 * over micro-batches) or `token_mean` (one token mean over the mini-batch).
 */
export const LOSS_AGGREGATIONS = ["micro_batch_token_mean", "token_mean"] as const;
/** A loss aggregation (see {@link LOSS_AGGREGATIONS}). */
export type LossAggregation = (typeof LOSS_AGGREGATIONS)[number];

/**
 * JobSpec fields that were renamed or moved, by their old path → the message a new submit that
 * sets them gets (stored specs that hold them still load: {@link parseStoredJobSpec}). `clip_ratio`
 * became `clip_ratio_low` and `clip_ratio_high`; `corrective_share` moved under `experimental`.
 */
export const RETIRED_FIELD_MESSAGES: Readonly<Record<string, string>> = {
  "optim.clip_ratio":
    "Cannot use optim.clip_ratio as it was replaced by optim.clip_ratio_low and optim.clip_ratio_high (the lower and upper ε of the PPO clip): set those instead",
  "warmup.policy.corrective_share":
    "Cannot use warmup.policy.corrective_share as it moved to experimental.corrective_share (the same share, default 0): set that instead",
};

/**
 * A zod error map for the strict object at `at` (e.g. `optim`): an unknown key that is a retired
 * field gets its {@link RETIRED_FIELD_MESSAGES} entry; other unknown fields keep zod's message.
 */
function retiredFieldMessage(at: string) {
  return (issue: { code?: string; keys?: readonly string[] }) => {
    if (issue.code !== "unrecognized_keys") return undefined;
    const key = issue.keys?.find((k) => Object.hasOwn(RETIRED_FIELD_MESSAGES, `${at}.${k}`));
    return key === undefined ? undefined : RETIRED_FIELD_MESSAGES[`${at}.${key}`];
  };
}

/**
 * `issues` with every retired field ({@link RETIRED_FIELD_MESSAGES}) pointed at itself: zod reports
 * unknown keys at their object (`warmup.policy`), so a user would not see which field to change.
 * Each retired key becomes its own issue at its full path (`warmup.policy.corrective_share`) whose
 * message names the new field; the object's other unknown keys stay in one issue at the object.
 */
export function pointAtRetiredFields(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue): z.core.$ZodIssue[] => {
    if (issue.code !== "unrecognized_keys") return [issue];
    const at = issue.path.map(String).join(".");
    const retired = issue.keys.filter((k) => Object.hasOwn(RETIRED_FIELD_MESSAGES, `${at}.${k}`));
    if (retired.length === 0) return [issue];
    const others = issue.keys.filter((k) => !retired.includes(k));
    return [
      ...retired.map((k): z.core.$ZodIssue => ({
        code: "custom",
        path: [...issue.path, k],
        message: RETIRED_FIELD_MESSAGES[`${at}.${k}`],
        input: issue.input,
      })),
      ...(others.length > 0
        ? [{
          ...issue,
          keys: others,
          message: `Unrecognized key${others.length > 1 ? "s" : ""}: ${
            others.map((k) => `"${k}"`).join(", ")
          }`,
        }]
        : []),
    ];
  });
}
const num = (min: number, max: number) => z.number().min(min).max(max);

/**
 * JobSpec fields that moved under `experimental`, by their old path: a new submit that sets the
 * old path is refused with a message naming the new one; a stored spec is moved over
 * ({@link parseStoredJobSpec}).
 */
export const MOVED_TO_EXPERIMENTAL = {
  "warmup.policy.corrective_share": "experimental.corrective_share",
} as const;

/**
 * Built-in model names: `builtin:tiny` (a ~1M-parameter Llama decoder, text only) and
 * `builtin:tiny-vl` (the same decoder plus a small image encoder, for image observations).
 */
export const BUILTIN_MODELS: readonly string[] = ["builtin:tiny", "builtin:tiny-vl"];

/** `model.base` accepted forms, checked in one place so the error message lists them all. */
const ModelBase = z.string().max(1024).refine(
  (v) =>
    BUILTIN_MODELS.includes(v) || S3_PREFIX_PATTERN.test(v) || JOB_REF_PATTERN.test(v) ||
    MODEL_REF_PATTERN.test(v),
  {
    message:
      "Cannot use this model base as it must be `builtin:tiny`, `builtin:tiny-vl`, `s3://bucket/prefix/` (ending in /, no `..` or empty segment), `job:<uuid>[@step]` or `model:<uuid>`",
  },
);

/** Env options: a flat-ish JSON object with bounded keys and total size (the env validates it). */
const EnvOptions = z.record(z.string().min(1).max(64), z.json()).refine(
  (v) => Object.keys(v).length <= 64 && JSON.stringify(v).length <= MAX_ENV_OPTIONS_CHARS,
  {
    message:
      `Cannot accept env.options as it must have at most 64 keys and ${MAX_ENV_OPTIONS_CHARS} characters of JSON`,
  },
);

/**
 * The `base_url` of an endpoint the service contacts (annotator, rollout engines): 1–2048
 * characters written as they will be used ({@link outboundUrlSyntaxProblem}: no whitespace at the
 * ends, absolute http(s), no credentials). A mistake here is a 400 at the field; the host rules,
 * which depend on the deployment, are checked at submit by the API (a 422) and by the worker.
 */
const baseUrl = () =>
  z.string().min(1).max(2048).superRefine((v, ctx) => {
    const problem = outboundUrlSyntaxProblem(v);
    if (problem !== undefined) {
      ctx.addIssue({ code: "custom", message: `Cannot use this base_url as ${problem}` });
    }
  });

/**
 * `warmup.analyzer.annotator`: an OpenAI-compatible endpoint (README.md, "LLM annotator"). The
 * URL rules (public hosts; internal ones only when the operator lists them) are checked at submit
 * by the API and again by the worker (jobs/outbound_url.ts), not here: they depend on the
 * deployment's settings.
 */
const Annotator = z.object({
  /**
   * Base URL of the API, e.g. `https://api.openai.com/v1` (chat completions at
   * `…/chat/completions`).
   */
  base_url: baseUrl(),
  /** Model name the endpoint serves, sent as `model`. */
  model: z.string().min(1).max(256),
  /**
   * Name of the tenant secret (`PUT /v1/secrets/{name}`) holding the API key, sent as a bearer
   * token.
   */
  credential_secret: z.string().regex(ID_PATTERN, {
    message: "Cannot use this credential_secret as it must match ^[a-z][a-z0-9_-]{0,63}$",
  }),
  /** `max_tokens` of each label. */
  max_tokens: int(16, 8192).default(512),
  /** Sampling temperature of the labels (0: greedy). */
  temperature: num(0, 2).default(0),
  /** Requests in flight at once. */
  concurrency: int(1, 64).default(4),
  /** Per-request timeout, seconds. */
  timeout_s: int(1, 600).default(60),
  /** Retries of a request after a connection error, timeout, 408/409/429 or 5xx. */
  max_retries: int(0, 10).default(2),
}).strict();

/** Most endpoints of `rollout.engine`. */
export const MAX_ROLLOUT_ENDPOINTS = 64;

/**
 * One OpenAI-compatible inference endpoint of `rollout.engine` (workers/seed/README.md, "Remote
 * rollout engines"). The URL rules are the annotator's (`checkAnnotatorUrl` with this field's
 * path: public hosts; internal ones only when listed in `SEED_ANNOTATOR_ALLOWED_HOSTS`), checked at
 * submit by the API and again by the worker.
 */
const RolloutEndpoint = z.object({
  /** Base URL of the server, e.g. `http://10.0.0.5:8000` (requests go to `…/v1/completions`). */
  base_url: baseUrl(),
  /**
   * Name under which the job's policy versions are loaded there: version k (the policy after k
   * updates) is `<model>-v<k>`. For vLLM LoRA jobs the served base model is the one vLLM started
   * with; for our server a full checkpoint is loaded under this name first.
   */
  model: z.string().min(1).max(200).regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]*$/, {
    message:
      "Cannot use this model name as it must start with a letter or digit and hold only letters, digits and . _ : / -",
  }),
  /** Tenant secret (`PUT /v1/secrets/{name}`) holding the endpoint's API key (a bearer token). */
  api_key_secret: z.string().regex(ID_PATTERN, {
    message: "Cannot use this api_key_secret as it must match ^[a-z][a-z0-9_-]{0,63}$",
  }).optional(),
}).strict();

/**
 * `rollout.engine`: `"local"` (the worker's own decode) or OpenAI-compatible endpoints that
 * generate the rollouts, kept on the current policy after every update.
 */
const RolloutEngine = z.union([
  z.literal("local"),
  z.object({
    endpoints: z.array(RolloutEndpoint).min(1).max(MAX_ROLLOUT_ENDPOINTS),
    /** Requests in flight at once on each endpoint. */
    max_in_flight_per_endpoint: int(1, 1024).default(16),
    /** Per-request timeout, seconds; a request past it is re-run on another endpoint. */
    timeout_s: int(1, 3600).default(120),
  }).strict(),
]);

const warmupStage = (episodes: number, epochs: number, lr: number, batchSize: number) => ({
  /** Demonstrations (policy) or annotated trajectories (analyzer) to train on. */
  episodes: int(0, 100_000).default(episodes),
  /** Passes over that data. */
  epochs: int(0, 100).default(epochs),
  /** AdamW learning rate of this stage. */
  lr: num(0, 1).default(lr),
  /** Samples (turns, or analyses) per optimizer step of this stage. */
  batch_size: int(1, 4096).default(batchSize),
});

/** The JobSpec's fields (see {@link JobSpecSchema}, which adds the cross-field rules). */
const JobSpecObject = z.object({
  /**
   * `seed` (default), `grpo` (episode-level, λ_opd = 0, no analysis), `gigpo` (episode + step
   * level, λ_opd = 0, no analysis) or `sft` (warm-up only). Picks the `advantage` defaults.
   */
  method: z.enum(METHODS).default("seed"),
  model: z.object({
    /**
     * `builtin:tiny` | `builtin:tiny-vl` (images) | `s3://bucket/prefix/` | `job:<uuid>[@step]` |
     * `model:<uuid>` (uploaded).
     */
    base: ModelBase.default("builtin:tiny"),
    /**
     * LoRA adapters (Hu et al. 2021) on the decoder's linear projections: only the adapters are
     * trained and kept in the optimizer; π_ref is the base with the adapters off; checkpoints hold
     * the adapter in PEFT's format. Absent: every parameter is trained.
     */
    lora: z.object({
      /**
       * r: rank of each adapter's A (r × in) and B (out × r). `model.lora` itself is optional:
       * without it every parameter is trained.
       */
      rank: int(1, 1024).default(8),
      /** α: the adapter's output is scaled by α / r. */
      alpha: num(0, 65_536).refine((a) => a > 0, {
        message: "Cannot use this alpha as it must be > 0 (at 0 the adapter changes nothing)",
      }).default(16),
      /** Dropout probability on the adapter's input (training only). */
      dropout: num(0, 0.9).default(0),
      /** Projections that get an adapter, by PEFT's module names. */
      target_modules: z.array(z.enum(LORA_TARGET_MODULES)).min(1).max(7)
        .refine((v) => new Set(v).size === v.length, {
          message: "Cannot use these target_modules as each module must appear once",
        })
        .default(["q_proj", "v_proj"]),
      /**
       * Also write the merged full weights (W + (α/r)·B·A) as a Hugging Face folder. Its
       * checkpoints then load alone; without it they need the base's chain too, and a job whose
       * `job:` base is already 8 adapter-only jobs in a row is refused (`adapter_chain_too_long`).
       */
      save_merged: z.boolean().default(false),
    }).strict().optional(),
  }).strict().prefault({}),
  env: z.object({
    /** Environment id, e.g. `sokoban` (resolved against the env registry by the worker). */
    id: z.string().regex(ID_PATTERN, {
      message: "Cannot use this env id as it must match ^[a-z][a-z0-9_-]{0,63}$",
    }),
    /** Environment options, validated by the environment's own schema. */
    options: EnvOptions.default({}),
    /**
     * Turns per episode before it is cut off; left out, the environment's `default_max_turns`
     * (`GET /v1/envs`, filled in at submit; else the worker asks the environment).
     */
    max_turns: int(1, 200).optional(),
    /** Past steps shown in each prompt. */
    history: int(0, 50).default(2),
  }).strict(),
  rollout: z.object({
    /** B: training tasks drawn per update. */
    tasks_per_step: int(1, 1024).default(8),
    /** G: copies of each task run from the same initial state. */
    group_size: int(1, 64).default(8),
    /** Sampling temperature of rollouts. */
    temperature: num(0, 2).default(1),
    /** Response token budget per turn. */
    max_new_tokens: int(1, 4096).default(64),
    /**
     * Who generates the rollouts: `local` (the worker, default) or `{ endpoints: [{ base_url,
     * model, api_key_secret? }], max_in_flight_per_endpoint, timeout_s }`.
     */
    engine: RolloutEngine.default("local"),
  }).strict().prefault({}),
  /**
   * Fields left out take the method's and environment's defaults ({@link armDefaults}: the
   * authors' launchers); a field given here wins.
   */
  advantage: z.object({
    /** `grpo` (pooled per task) or `gigpo` (adds the step-level anchor-state term). */
    estimator: z.enum(ESTIMATORS).optional(),
    /** `mean_std`: (s − mean)/(std + 1e-6); `mean`: s − mean. */
    norm: z.enum(NORMS).optional(),
    /** p: score subtracted from a sample whose action was invalid. */
    invalid_action_penalty: num(0, 100).optional(),
    /** Discount of the GiGPO step-level return. */
    gamma: num(0, 1).default(0.95),
    /** Episode reward R: `success` = 10·won; `score` = the env's score (sum of step rewards). */
    reward_source: z.enum(["success", "score"]).default("success"),
  }).strict().prefault({}),
  seed: z.object({
    /** λ_opd: weight of the on-policy distillation loss L_opd (a mean over teacher tokens). */
    opd_coef: num(0, 100).default(0.01),
    /** β of the gate σ(β·Δ). */
    gate_beta: num(0, 1000).default(5),
    /** Which trajectories the analyzer summarises into skills (`none`: no analysis, no OPD). */
    analyze: z.enum(["all", "failed_only", "none"]).default("all"),
    /**
     * Who writes each analysed trajectory's skill: `policy` (the analyzer, θ_old; the paper's
     * SEED) or `reference` (the environment's reference analyzer: an oracle skill, no analyzer
     * warm-up or replay). SEED with `reference` − GRPO is the most skills can give this policy
     * (workers/seed/README.md, Arms). Only for method `seed` with `analyze` other than `none`.
     */
    skill_source: z.enum(SKILL_SOURCES).default("policy"),
    /**
     * Most critical-step skills per analysed trajectory that reach the teacher prompt: a turn
     * with one is scored under it instead of the episode skill (the authors' `skill_mode`
     * `episode_step` with `skill_teacher_mode` `step_priority`); 0: the episode skill only
     * (`episode_only`). Step skills come only from the environment's reference analyzer
     * (method `seed` with `skill_source: "reference"`): no built-in environment's writes them,
     * an HTTP environment's `POST /v1/analysis` may (workers/envs/http/protocol.ts). Left
     * out: there, the authors' launchers' count for the environment — 5 for `household` and
     * `webshop`, 2 for `search`, 0 for any other id; 0 for every other job (`stepSkillDefault`).
     * The policy's analyzer writes the episode skill only, and `grpo`, `gigpo` and `sft` analyse
     * nothing, so there a value set here is accepted and changes nothing, as the other `seed`
     * fields under those methods (workers/seed/README.md, Departures).
     */
    max_step_skills: int(0, 64).optional(),
    /** Token budget of one analysis (greedy). */
    analyzer_max_new_tokens: int(1, 4096).default(192),
    /** Analyzer prompts show only the last N steps of a trajectory (bounds its length). */
    analyzer_max_steps: int(1, 200).default(8),
    /**
     * Observations/responses longer than this (chars) are shortened in analyzer prompts (200, as
     * both built-in presets ran: it keeps the analyzer's prompt short for builtin:tiny).
     */
    analyzer_max_field_chars: int(16, 100_000).default(200),
  }).strict().prefault({}),
  optim: z.strictObject({
    /**
     * AdamW learning rate (peak, for schedules). 3e-4 with `mini_batch_size` 256 was the best of
     * the measured settings for builtin:tiny (1e-3 lost 1–15 points, 3e-3 collapsed;
     * bench/RESULTS.md); a pretrained model wants far less (the paper's 3B runs use 1e-6).
     */
    lr: z.number().positive().max(1).default(3e-4),
    /** AdamW decoupled weight decay. */
    weight_decay: num(0, 1).default(0),
    /** ε_low of the PPO clip: the ratio is clipped below at 1 − clip_ratio_low. */
    clip_ratio_low: num(0, 1).default(0.2),
    /** ε_high of the PPO clip: the ratio is clipped above at 1 + clip_ratio_high. */
    clip_ratio_high: num(0, 10).default(0.2),
    /** c of the dual clip (applies when A < 0); must be > 1. */
    dual_clip: z.number().gt(1).max(100).default(3),
    /** c_H: weight of the entropy bonus (0: none, as the tuned presets ran). */
    entropy_coef: num(0, 10).default(0),
    /**
     * c_KL: weight of the clamped k3 KL to the reference policy (the warm-up checkpoint); 0 loads
     * none.
     */
    kl_coef: num(0, 10).default(0.01),
    /** Passes over each update's samples. */
    ppo_epochs: int(1, 64).default(1),
    /** Samples per optimizer step (one AdamW step per 256 samples, with `lr` 3e-4). */
    mini_batch_size: int(1, 65_536).default(256),
    /**
     * How each optimizer step averages its loss. `micro_batch_token_mean` (the reference code's
     * gradient accumulation): every term is a token mean within each micro-batch of
     * `micro_batch_size` samples, and the step minimises the mean of the micro-batches' losses.
     * `token_mean`: one token mean over the whole mini-batch.
     */
    loss_aggregation: z.enum(LOSS_AGGREGATIONS).default("micro_batch_token_mean"),
    /**
     * Samples per micro-batch of `micro_batch_token_mean` (the reference launchers'
     * `ppo_micro_batch_size_per_gpu`, 8 for Sokoban); the last one of a mini-batch may be
     * smaller. How the worker splits its computation for memory does not depend on it.
     */
    micro_batch_size: int(1, 65_536).default(8),
    /** Global gradient-norm clip. */
    max_grad_norm: num(0, 1e6).default(1),
    /** Learning-rate schedule over `steps`. */
    lr_schedule: z.enum(["constant", "warmup", "cosine"]).default("warmup"),
    /** Linear warm-up steps of `warmup` and `cosine` (the first update runs at lr / 2). */
    warmup_steps: int(0, 100_000).default(2),
  }, { error: retiredFieldMessage("optim") }).prefault({}),
  warmup: z.object({
    /** Policy SFT on expert demonstrations. */
    policy: z.strictObject({
      ...warmupStage(64, 2, 1e-3, 16),
      /**
       * Share of the policy's demonstrations shown with their own episode's reference skill in
       * the teacher prompt's position, so the policy learns to act on a skill in its prompt
       * (as a pretrained instruct model does); 0 turns it off. In an environment with skilled
       * demonstrations (household) that share of the tasks is instead played by an expert that
       * acts on what only the skill says (where the goal object usually is), with that skill in
       * every prompt (workers/seed/README.md, "Warm-up").
       */
      skill_share: num(0, 1).default(0.5),
      /**
       * How many of the last `epochs` train on the skill-conditioned data (`skill_share`, and
       * `experimental.corrective_share`); the passes before them show every demonstration with
       * its ordinary prompt, so the policy first learns to act and then to read a skill. Absent:
       * all of them.
       */
      skill_epochs: int(0, 100).optional(),
      /**
       * Learning-rate schedule over the stage's planned optimizer steps (`epochs` passes):
       * `constant`, or `cosine` (half-cosine from `lr` to 0; with `target_success` the stage may
       * stop before the end).
       */
      lr_schedule: z.enum(["constant", "cosine"]).default("constant"),
      /**
       * Held-out success at which the stage stops (0–1), checked every `check_every` optimizer
       * steps on `check_episodes` train tasks that rollouts never draw; `epochs` is then the most
       * it trains. Absent: the stage runs every epoch.
       */
      target_success: num(0, 1).optional(),
      /** Optimizer steps between held-out success checks (`warmup_check` events); 0 = none. */
      check_every: int(0, 100_000).default(0),
      /**
       * Episodes of each held-out check, and of the skill check after the warm-up
       * (`warmup_skill_check`: success and Δ log-prob with the reference skill in the prompt vs
       * without); 0 = no checks.
       */
      check_episodes: int(0, 1024).default(0),
    }, { error: retiredFieldMessage("warmup.policy") }).refine(
      (p) => p.skill_epochs === undefined || p.skill_epochs <= p.epochs,
      {
        path: ["skill_epochs"],
        message: "Cannot use warmup.policy.skill_epochs as it must be at most warmup.policy.epochs",
      },
    ).refine(
      (p) => p.target_success === undefined || (p.check_every > 0 && p.check_episodes > 0),
      {
        path: ["target_success"],
        message:
          "Cannot use warmup.policy.target_success as warmup.policy.check_every and check_episodes must be > 0",
      },
    ).prefault({}),
    /**
     * Analyzer SFT on (trajectory → skill) pairs of the warmed policy's trajectories, labelled by
     * the environment's reference analyzer, or by an LLM (`annotator`). The defaults (192
     * trajectories × 2 epochs, lr 2e-3, batch 32) are the built-in presets' for builtin:tiny.
     */
    analyzer: z.strictObject({
      ...warmupStage(192, 2, 2e-3, 32),
      /**
       * An OpenAI-compatible chat-completions endpoint that labels the trajectories instead of
       * the reference analyzer (the paper's stronger annotator); only labels that parse are kept.
       */
      annotator: Annotator.optional(),
    }).prefault({}),
    /** Skip both stages (the base model is already warm). */
    skip: z.boolean().default(false),
    /** Optional extra SFT data: an `s3://bucket/key` JSONL object. */
    data: z.string().max(1024).regex(S3_OBJECT_PATTERN, {
      message:
        "Cannot use warmup.data as it must be an s3://bucket/key object URI (no `..` or empty segment)",
    }).optional(),
  }).strict().prefault({}),
  /** Number of RL updates. */
  steps: int(0, 100_000).default(20),
  /** Evaluate every N updates (0 = only at the end). */
  eval_every: int(0, 100_000).default(10),
  /** Checkpoint every N updates (a final checkpoint is always written). */
  checkpoint_every: int(1, 100_000).default(5),
  eval: z.object({
    splits: z.array(z.enum(EVAL_SPLITS)).min(1).max(3).default(["test_seen", "test_unseen"]),
    /** Episodes per split. */
    episodes: int(1, 10_000).default(32),
    /** 0 means greedy. */
    temperature: num(0, 2).default(0),
    /**
     * `library`: also evaluate with the skill library's best skill for each task's family in the
     * prompt (same tasks and seeds), reporting success with and without it; `none`: without only.
     */
    skills: z.enum(["none", "library"]).default("none"),
  }).strict().prefault({}),
  /** Seed of every random draw of the job (tasks, sampling, init). */
  random_seed: int(0, 2 ** 32 - 1).default(0),
  /** Larger runs sooner; ties go to the oldest job. */
  priority: int(-1000, 1000).default(0),
  /** Runs a job may start before it fails (a lost worker costs one). */
  max_attempts: int(1, 20).default(3),
  requirements: z.object({
    device: z.enum(DEVICES).default("cpu"),
  }).strict().prefault({}),
  /**
   * Experimental: settings whose measurements have not decided them. Each may change meaning or
   * go in a later release; every default here turns its experiment off, so a job without this
   * block runs the decided pipeline (jobs/README.md, Experimental).
   */
  experimental: z.object({
    /**
     * Corrective samples in the policy warm-up, as a share of the demonstrations: noisy-expert
     * episodes that failed, at each state where a random (non-expert) action was taken, the
     * failure's reference skill in the prompt and the expert's action as the target. They train
     * in the same passes as `warmup.policy.skill_share`'s turns (`warmup.policy.skill_epochs`).
     * 0 turns it off. No gain was measured at 0.25 on the demo's Sokoban (bench/RESULTS.md).
     */
    corrective_share: num(0, 1).default(0),
  }).strict().prefault({}),
}).strict();

/** What the object schema parses to: `advantage` fields may still be absent (filled below). */
type SpecFields = z.output<typeof JobSpecObject>;
/**
 * A parsed JobSpec with every default filled in (`advantage` from {@link armDefaults},
 * `seed.max_step_skills` from {@link stepSkillDefault}).
 */
export type JobSpec = Omit<SpecFields, "advantage" | "seed"> & {
  advantage: Required<SpecFields["advantage"]>;
  seed: Required<SpecFields["seed"]>;
};
/** `rollout.engine` when it names endpoints (see the JobSpec). */
export type RemoteRolloutEngine = Exclude<z.output<typeof RolloutEngine>, "local">;
/** What a client may send: every field with a default is optional. */
export type JobSpecInput = z.input<typeof JobSpecObject>;
/** The advantage settings an arm picks (see {@link armDefaults}). */
export type ArmAdvantage = Pick<
  JobSpec["advantage"],
  "estimator" | "norm" | "invalid_action_penalty"
>;

/**
 * Group normalisation of the authors' GiGPO launchers by environment id (examples/gigpo_trainer/
 * run_{sokoban,ezpoints}.sh `mode="mean_norm"`, run_{alfworld,webshop,search}.sh
 * `GIGPO_MODE=mean_std_norm`); other environments take `mean`, the GiGPO paper's setting.
 */
const GIGPO_NORM: Readonly<Record<string, JobSpec["advantage"]["norm"]>> = {
  sokoban: "mean",
  ezpoints: "mean",
  household: "mean_std",
  webshop: "mean_std",
  search: "mean_std",
};

/**
 * The advantage settings of an arm when the spec leaves them out, as the authors' launchers
 * (agent_rl 2cf2fad, examples/seed_trainer/_common/*.sh, examples/grpo_trainer/*.sh,
 * examples/gigpo_trainer/*.sh) run each method:
 * - estimator: `gigpo` for method `gigpo`, else `grpo` (their SEED and GRPO launchers set
 *   `step_advantage_w` 0: the episode-level advantage only); `estimator` (when the user set it)
 *   replaces it, so `seed` on GiGPO takes GiGPO's normalisation;
 * - norm: episode-level (`grpo`) `mean` for webshop (`SEED_MODE=mean_norm`, `GIGPO_MODE=mean_norm`)
 *   and `mean_std` elsewhere; `gigpo` per {@link GIGPO_NORM};
 * - invalid_action_penalty p: 0.01 for search, 0.1 elsewhere (`invalid_action_penalty_coef`).
 * Environment ids are the built-in ones (household stands for ALFWorld); any other id takes the
 * values of the unnamed rows.
 */
export function armDefaults(
  method: Method,
  envId: string,
  estimator?: JobSpec["advantage"]["estimator"],
): ArmAdvantage {
  const est = estimator ?? (method === "gigpo" ? "gigpo" : "grpo");
  return {
    estimator: est,
    norm: est === "gigpo" ? GIGPO_NORM[envId] ?? "mean" : envId === "webshop" ? "mean" : "mean_std",
    invalid_action_penalty: envId === "search" ? 0.01 : 0.1,
  };
}

/**
 * The default of `seed.max_step_skills`. Where a job's analyses can carry critical-step skills
 * (method `seed` with `skillSource` `reference`: only the environment's reference analyzer writes
 * them — no built-in one does, a remote environment's `POST /v1/analysis` may), the count the
 * authors' SEED launchers run for the environment (agent_rl 2cf2fad,
 * `examples/seed_trainer/_common/*.sh`: `SEED_SKILL_MODE=episode_step` with
 * `SEED_ANALYSIS_MAX_STEP_SKILLS_PER_TRAJ` 5 for alfworld.sh and webshop.sh, 2 for search.sh;
 * `episode_only` for sokoban_visual.sh and ezpoints.sh): household (ALFWorld) and webshop 5, search
 * 2, every other id 0. Every other job gets 0, so its stored spec does not show a count that
 * nothing reads (the policy's analyzer writes no step skills; other methods analyse nothing).
 */
export function stepSkillDefault(
  envId: string,
  job: { method: Method; skillSource: (typeof SKILL_SOURCES)[number] },
): number {
  if (job.method !== "seed" || job.skillSource !== "reference") return 0;
  return envId === "household" || envId === "webshop" ? 5 : envId === "search" ? 2 : 0;
}

/**
 * The JobSpec schema. Parse with `JobSpecSchema.parse(input)` (throws `z.ZodError` with field
 * paths) or `.safeParse`. Defaults suit the small CPU models trained here; the paper's 3B settings
 * are lr 1e-6, B = 16, G = 8, 150 updates. `advantage` fields left out are filled from
 * {@link armDefaults} of the spec's method and environment.
 */
export const JobSpecSchema = JobSpecObject.superRefine((spec, ctx) => {
  if (spec.seed.skill_source === "reference" && spec.method !== "seed") {
    ctx.addIssue({
      code: "custom",
      path: ["seed", "skill_source"],
      message:
        `Cannot use seed.skill_source "reference" as it needs method "seed": current method is ${spec.method}`,
    });
  }
  if (spec.seed.skill_source === "reference" && spec.seed.analyze === "none") {
    ctx.addIssue({
      code: "custom",
      path: ["seed", "skill_source"],
      message:
        `Cannot use seed.skill_source "reference" as seed.analyze must not be "none" (no trajectory would get a skill)`,
    });
  }
}).overwrite((spec) => {
  const arm = armDefaults(spec.method, spec.env.id, spec.advantage.estimator);
  const a = spec.advantage;
  return {
    ...spec,
    seed: {
      ...spec.seed,
      max_step_skills: spec.seed.max_step_skills ??
        stepSkillDefault(spec.env.id, { method: spec.method, skillSource: spec.seed.skill_source }),
    },
    advantage: {
      ...a,
      estimator: arm.estimator,
      norm: a.norm ?? arm.norm,
      invalid_action_penalty: a.invalid_action_penalty ?? arm.invalid_action_penalty,
    },
  };
}) as unknown as z.ZodType<JobSpec, JobSpecInput>;

/**
 * The turn limit a job's episodes run with: `env.max_turns` when the spec sets it, else the
 * environment's own default (`defaultMaxTurns`, which `GET /v1/envs` lists as
 * `default_max_turns`).
 */
export function maxTurnsOf(
  spec: { env: { max_turns?: number } },
  env: { defaultMaxTurns: number },
): number {
  return spec.env.max_turns ?? env.defaultMaxTurns;
}

/**
 * Parses and defaults a job spec.
 * @throws z.ZodError with field paths when the input is invalid.
 */
export function parseJobSpec(input: unknown): JobSpec {
  const r = safeParseJobSpec(input);
  if (!r.success) throw r.error;
  return r.data;
}

/**
 * `JobSpecSchema.safeParse(input)` with a retired field's issue at that field's own path
 * ({@link pointAtRetiredFields}): what the API answers a submit with.
 */
export function safeParseJobSpec(
  input: unknown,
): { success: true; data: JobSpec; error?: undefined } | {
  success: false;
  data?: undefined;
  error: z.ZodError;
} {
  const r = JobSpecSchema.safeParse(input);
  if (r.success) return { success: true, data: r.data };
  return { success: false, error: new z.ZodError(pointAtRetiredFields(r.error.issues)) };
}

/**
 * The JobSpec fields a client submitted, as stored beside the parsed spec (`jobs.submitted_spec`,
 * `submitted_spec` of a job on the wire): `input` (the JSON object posted, labels taken out)
 * reduced to the paths its parse `spec` also holds, each with `spec`'s value there. Defaults the
 * client left out stay out, so a copy submitted from it fills them afresh (the dependent ones
 * too: {@link armDefaults}, {@link stepSkillDefault}, `env.max_turns`). By construction it holds
 * nothing the stored spec does not: a field the parse dropped is dropped here, whatever it held.
 * Arrays are walked element by element; a key `__proto__` stays an own key.
 */
export function submittedFields(
  input: Record<string, unknown>,
  spec: JobSpec,
): Record<string, unknown> {
  return keepSubmitted(input, spec) as Record<string, unknown>;
}

function keepSubmitted(input: unknown, parsed: unknown): unknown {
  if (isObject(input) && isObject(parsed)) {
    return Object.fromEntries(
      Object.keys(input).filter((k) => Object.hasOwn(parsed, k)).map((k) => [
        k,
        keepSubmitted(input[k], parsed[k]),
      ]),
    );
  }
  if (Array.isArray(input) && Array.isArray(parsed)) {
    return parsed.slice(0, input.length).map((v, i) => keepSubmitted(input[i], v));
  }
  return parsed;
}

/**
 * JobSpec fields that existed once and are read no more: the measured departures that became
 * fixed behaviour (jobs/README.md, Retired fields). A stored spec written before their removal
 * still runs: `parseStoredJobSpec` drops them; a new submit that sets one is refused (400).
 */
export const RETIRED_SEED_FIELDS = [
  "analyzer_constrained",
  "analyzer_summary",
  "skill_grammar",
  "analyzer_feedback",
  "analyzer_replay_samples",
  "analyzer_replay_coef",
] as const;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * Parses a spec as stored with a job (the defaulted output of `parseJobSpec` at submit time,
 * possibly written by an earlier release), accepting the fields of earlier schemas that a new
 * submit refuses: the fields of {@link RETIRED_SEED_FIELDS} are dropped; the fields of
 * {@link MOVED_TO_EXPERIMENTAL} move to their new path (where that is absent); `optim.clip_ratio`
 * (one ε) becomes `clip_ratio_low` and `clip_ratio_high` where those are absent, and such a spec
 * predates `optim.loss_aggregation` and ran with one token mean per mini-batch, so it keeps
 * `token_mean` unless it says otherwise (a resumed job keeps its loss); a stored `seed` without
 * `max_step_skills` predates critical-step skills and ran without them, so it keeps 0. The input
 * is not modified.
 * @throws z.ZodError with field paths when the stored spec is invalid under both schemas.
 */
export function parseStoredJobSpec(stored: unknown): JobSpec {
  if (stored === null || typeof stored !== "object" || Array.isArray(stored)) {
    return JobSpecSchema.parse(stored);
  }
  const spec = { ...stored } as Record<string, unknown>;
  const seed = spec.seed;
  if (seed !== null && typeof seed === "object" && !Array.isArray(seed)) {
    const kept = { max_step_skills: 0, ...seed } as Record<string, unknown>;
    for (const field of RETIRED_SEED_FIELDS) delete kept[field];
    spec.seed = kept;
  }
  const warmup = spec.warmup;
  const policy = isObject(warmup) ? warmup.policy : undefined;
  if (isObject(warmup) && isObject(policy) && Object.hasOwn(policy, "corrective_share")) {
    const { corrective_share, ...rest } = policy;
    spec.warmup = { ...warmup, policy: rest };
    const experimental = isObject(spec.experimental) ? spec.experimental : {};
    spec.experimental = { corrective_share, ...experimental };
  }
  const optim = spec.optim;
  if (typeof optim === "object" && optim !== null && Object.hasOwn(optim, "clip_ratio")) {
    const { clip_ratio, ...rest } = optim as Record<string, unknown>;
    spec.optim = {
      clip_ratio_low: clip_ratio,
      clip_ratio_high: clip_ratio,
      loss_aggregation: "token_mean",
      ...rest,
    };
  }
  return JobSpecSchema.parse(spec);
}
