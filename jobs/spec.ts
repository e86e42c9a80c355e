/**
 * The JobSpec: the one zod schema of a training job (README.md, "The JobSpec"), the single source
 * of truth for the API's validation, the OpenAPI document and the worker's configuration.
 *
 * Every field has a default, so `{ "env": { "id": "sokoban" } }` is a complete job. Every object is
 * `.strict()` (an unknown field is a validation error, not silently dropped) and every number,
 * string and collection is bounded. Field names are snake_case because they are the wire format.
 */
import { z } from "zod";

/** Training methods. `grpo` is the SEED pipeline with λ_opd = 0 and no analysis; `sft` only warms up. */
export const METHODS = ["seed", "grpo", "sft"] as const;
/** A training method (see {@link METHODS}). */
export type Method = (typeof METHODS)[number];

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
/** `job:<uuid>` or `job:<uuid>@<step>` — a checkpoint of an earlier job (latest when no step). */
const JOB_REF_PATTERN =
  /^job:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:@(?:0|[1-9][0-9]{0,8}))?$/;
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
const num = (min: number, max: number) => z.number().min(min).max(max);

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
 * `warmup.analyzer.annotator`: an OpenAI-compatible endpoint (README.md, "LLM annotator"). The
 * URL rules (public hosts; internal ones only when the operator lists them) are checked at submit
 * by the API and again by the worker (jobs/outbound_url.ts), not here: they depend on the
 * deployment's settings.
 */
const Annotator = z.object({
  /** Base URL of the API, e.g. `https://api.openai.com/v1` (chat completions at `…/chat/completions`). */
  base_url: z.string().min(1).max(2048).refine((v) => URL.canParse(v), {
    message: "Cannot use this base_url as it must be an absolute http(s) URL",
  }),
  /** Model name the endpoint serves, sent as `model`. */
  model: z.string().min(1).max(256),
  /** Name of the tenant secret (`PUT /v1/secrets/{name}`) holding the API key, sent as a bearer token. */
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
  base_url: z.string().min(1).max(2048).refine((v) => URL.canParse(v), {
    message: "Cannot use this base_url as it must be an absolute http(s) URL",
  }),
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

const WarmupStage = (episodes: number, epochs: number, lr: number) =>
  z.object({
    /** Demonstrations (policy) or annotated trajectories (analyzer) to train on. */
    episodes: int(0, 100_000).default(episodes),
    /** Passes over that data. */
    epochs: int(0, 100).default(epochs),
    /** AdamW learning rate of this stage. */
    lr: num(0, 1).default(lr),
    /** Samples (turns, or analyses) per optimizer step of this stage. */
    batch_size: int(1, 4096).default(16),
  }).strict();

/**
 * The JobSpec schema. Parse with `JobSpecSchema.parse(input)` (throws `z.ZodError` with field
 * paths) or `.safeParse`. Defaults suit the small CPU models trained here; the paper's 3B settings
 * are lr 1e-6, B = 16, G = 8, 150 updates.
 */
export const JobSpecSchema = z.object({
  /** `seed` (default), `grpo` (λ_opd = 0, no analysis) or `sft` (warm-up only). */
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
      /** Also write the merged full weights (W + (α/r)·B·A) as a Hugging Face folder. */
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
  advantage: z.object({
    /** `grpo` (pooled per task) or `gigpo` (adds the step-level anchor-state term). */
    estimator: z.enum(["grpo", "gigpo"]).default("grpo"),
    /** `mean_std`: (s − mean)/(std + 1e-6); `mean`: s − mean. */
    norm: z.enum(["mean_std", "mean"]).default("mean_std"),
    /** p: score subtracted from a sample whose action was invalid. */
    invalid_action_penalty: num(0, 100).default(0.1),
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
    /** Token budget of one analysis (greedy). */
    analyzer_max_new_tokens: int(1, 4096).default(192),
    /** Analyzer decodes under the analysis JSON schema: every analysis parses (README). */
    analyzer_constrained: z.boolean().default(true),
    /**
     * RL-time analyses write `episode_summary` after the skill. Only the skill reaches the loss
     * (the teacher prompt), so `false` decodes `{"episode_skill": "…"}` alone and saves the
     * summary's decode steps; library entries store `"summary": ""`, dumps `"summary": null`.
     * Analyzer warm-up and replay targets keep it in every case.
     */
    analyzer_summary: z.boolean().default(true),
    /**
     * `env`: with `analyzer_constrained`, the skill is also held to the environment's skill
     * grammar where it has one (built-in sokoban and household): every skill is a sentence its
     * reference analyzer could write, a workflow for a won trajectory and a failure sentence for a
     * lost one (README, The analyzer). `free`: any text.
     */
    skill_grammar: z.enum(["env", "free"]).default("env"),
    /**
     * Analyzer replay: trajectories of each update, labelled by the environment's reference
     * analyzer, whose analyzer SFT loss is added to the update (keeps skills readable through RL).
     */
    analyzer_replay_samples: int(0, 4096).default(8),
    /** Weight of the analyzer replay's token-mean NLL in the update loss (0 turns it off). */
    analyzer_replay_coef: num(0, 100).default(0.5),
    /** Analyzer prompts show only the last N steps of a trajectory (bounds its length). */
    analyzer_max_steps: int(1, 200).default(8),
    /** Observations/responses longer than this (chars) are shortened in analyzer prompts. */
    analyzer_max_field_chars: int(16, 100_000).default(600),
    /**
     * Show the environment's per-step feedback (what the action did) to the analyzer as `Effect:`
     * lines, the omitted steps' as one `Earlier effects:` line (≤ max(`analyzer_max_steps`, 8) ×
     * `analyzer_max_field_chars` chars). `false`: the reference code's prompt. No change for
     * environments without feedback (README, Algorithm, step 3).
     */
    analyzer_feedback: z.boolean().default(true),
  }).strict().prefault({}),
  optim: z.object({
    /** AdamW learning rate (peak, for schedules). */
    lr: z.number().positive().max(1).default(1e-4),
    /** AdamW decoupled weight decay. */
    weight_decay: num(0, 1).default(0),
    /** ε of the PPO clip. */
    clip_ratio: num(0, 1).default(0.2),
    /** c of the dual clip (applies when A < 0); must be > 1. */
    dual_clip: z.number().gt(1).max(100).default(3),
    entropy_coef: num(0, 10).default(0.001),
    kl_coef: num(0, 10).default(0.01),
    /** Passes over each update's samples. */
    ppo_epochs: int(1, 64).default(1),
    /** Samples per optimizer step. */
    mini_batch_size: int(1, 65_536).default(64),
    /** Global gradient-norm clip. */
    max_grad_norm: num(0, 1e6).default(1),
    /** Learning-rate schedule over `steps`. */
    lr_schedule: z.enum(["constant", "warmup", "cosine"]).default("constant"),
    /** Linear warm-up steps of `warmup` and `cosine`. */
    warmup_steps: int(0, 100_000).default(0),
  }).strict().prefault({}),
  warmup: z.object({
    /** Policy SFT on expert demonstrations. */
    policy: WarmupStage(64, 2, 1e-3).extend({
      /**
       * Share of the policy's demonstrations shown with their own episode's reference skill in
       * the teacher prompt's position, so the policy learns to act on a skill in its prompt
       * (as a pretrained instruct model does); 0 turns it off.
       */
      skill_share: num(0, 1).default(0.5),
      /**
       * Corrective samples, as a share of the demonstrations: noisy-expert episodes that failed,
       * at each state where a random (non-expert) action was taken, the failure's reference skill
       * in the prompt and the expert's action as the target. 0 turns it off.
       */
      corrective_share: num(0, 1).default(0),
      /**
       * How many of the last `epochs` train on the skill-conditioned data (`skill_share`,
       * `corrective_share`); the passes before them show every demonstration with its ordinary
       * prompt, so the policy first learns to act and then to read a skill. Absent: all of them.
       */
      skill_epochs: int(0, 100).optional(),
    }).refine((p) => p.skill_epochs === undefined || p.skill_epochs <= p.epochs, {
      path: ["skill_epochs"],
      message: "Cannot use warmup.policy.skill_epochs as it must be at most warmup.policy.epochs",
    }).prefault({}),
    /**
     * Analyzer SFT on (trajectory → skill) pairs of the warmed policy's trajectories, labelled by
     * the environment's reference analyzer, or by an LLM (`annotator`).
     */
    analyzer: WarmupStage(64, 2, 1e-3).extend({
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
}).strict();

/** `rollout.engine` when it names endpoints (see the JobSpec). */
export type RemoteRolloutEngine = Exclude<z.output<typeof RolloutEngine>, "local">;

/** A parsed JobSpec with every default filled in. */
export type JobSpec = z.output<typeof JobSpecSchema>;
/** What a client may send: every field with a default is optional. */
export type JobSpecInput = z.input<typeof JobSpecSchema>;

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
  return JobSpecSchema.parse(input);
}
