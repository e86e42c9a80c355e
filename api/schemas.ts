/**
 * The API's wire schemas (zod): query strings, path parameters and response bodies. Request
 * bodies reuse `JobSpecSchema` from jobs/. `api/openapi.ts` turns these same objects into the
 * OpenAPI document, so validation and documentation cannot drift apart.
 *
 * Wire names are snake_case; times are ISO 8601 strings; ids are uuids, event ids integers.
 */
import { z } from "zod";
import { JOB_STATUSES } from "../jobs/schema.ts";
import { JobMetadata, JobName } from "../jobs/labels.ts";
import { MAX_SECRET_VALUE_BYTES } from "../jobs/secrets.ts";
import { limitSchema } from "./cursor.ts";

/** Most digits a `{step}` may have (leading zeros included). */
export const MAX_STEP_DIGITS = 32;
const STEP_DIGITS = new RegExp(`^[0-9]{1,${MAX_STEP_DIGITS}}$`);

/** Path `{id}` of a job (a uuid; anything else is reported as an unknown job, 404). */
export const JobIdParam = z.uuid();

/** Fewest hex digits `id_prefix` takes: the 8 the dashboard shows for a job without a name. */
export const MIN_ID_PREFIX_DIGITS = 8;

/**
 * The start of a job id as written (`720402c1`, `720402c1-8a3a`, `720402c18a3a`, any case): 8 to
 * 32 hex digits, with the id's hyphens in their places or none. Lowercased.
 */
export const JobIdPrefix = z.string().max(36).transform((s) => s.toLowerCase()).refine(
  (s) => {
    const hex = s.replaceAll("-", "");
    // At most 32 digits: 33 to 36 digits without hyphens fit the 36 characters but no uuid.
    return /^[0-9a-f]+$/.test(hex) && hex.length >= MIN_ID_PREFIX_DIGITS && hex.length <= 32 &&
      (s === hex || uuidOfDigits(hex.padEnd(32, "0")).startsWith(s));
  },
  {
    error:
      `id_prefix must be the start of a job id: ${MIN_ID_PREFIX_DIGITS} to 32 hex digits, with the id's hyphens in their places or none`,
  },
);

/** Hex digits written as a uuid is (hyphens after the 8th, 12th, 16th and 20th digit). */
export function uuidOfDigits(hex: string): string {
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)]
    .filter((part) => part !== "").join("-");
}

/**
 * A step in a path (`{step}`) or query (`?step=`): decimal digits only, 0..1e9. Only digit
 * strings are turned into numbers: `z.coerce.number()` read `?step=` and `?step=%20` as step 0
 * and accepted `0x1` and `1e0`. Leading zeros are read as the number they write (`01` and
 * `0000000001` are step 1), up to {@link MAX_STEP_DIGITS} digits.
 */
export const StepParam = z.preprocess(
  (v) => (typeof v === "string" && STEP_DIGITS.test(v) ? Number(v) : v),
  z.number({ error: "Step must be decimal digits: a whole number from 0 to 1000000000" }).int()
    .min(0).max(1_000_000_000),
);

/**
 * `GET /v1/jobs` query. `status` is one state or a comma-separated list; `name` matches the name
 * exactly, `name_prefix` its beginning; `id_prefix` the beginning of the id; `metadata[key]=value`
 * (repeatable with other keys) keeps jobs whose metadata holds every given pair (api/routes_jobs.ts
 * gathers them into `metadata`).
 */
export const ListJobsQuery = z.object({
  status: z.string().max(200).transform((s) => s.split(",").map((x) => x.trim())).pipe(
    z.array(z.enum(JOB_STATUSES)).min(1).max(JOB_STATUSES.length),
  ).optional(),
  name: JobName.optional().describe("Jobs named exactly this"),
  name_prefix: JobName.optional().describe("Jobs whose name starts with this (case-sensitive)"),
  id_prefix: JobIdPrefix.optional().describe(
    "Jobs whose id starts with this: 8 to 32 hex digits (any case), with the id's hyphens or none",
  ),
  metadata: JobMetadata.optional().describe(
    "Sent as metadata[key]=value (one parameter per key): jobs whose metadata holds every pair",
  ),
  limit: limitSchema(20, 100),
  cursor: z.string().min(1).max(512).optional(),
}).strict();

/** `GET /v1/jobs/{id}/events` query (JSON pages). `after` is an event id (exclusive). */
export const EventsQuery = z.object({
  after: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  limit: limitSchema(100, 1000),
}).strict();

/** `GET /v1/jobs/{id}/metrics` query. */
export const MetricsQuery = z.object({
  format: z.enum(["json", "csv"]).optional(),
  // Bounded like StepParam: `job_metrics.step` is an int4, so 2^31 failed in SQL (500).
  from_step: StepParam.optional(),
  to_step: StepParam.optional(),
}).strict();

/** `GET /v1/jobs/{id}/skills` query: a step, or the latest library when absent. */
export const SkillsQuery = z.object({ step: StepParam.optional() }).strict();

/** `GET …/checkpoints/{step}/files/{name}` query. */
export const FileQuery = z.object({
  /** `false` answers JSON `{url, expires_at}` instead of a 302. */
  redirect: z.enum(["true", "false"]).default("true"),
  /** Lifetime of the presigned URL, seconds (1..3600, default 300). */
  expires_in: z.coerce.number().int().min(1).max(3600).default(300),
}).strict();

/** Progress of a running job. */
export const ProgressView = z.object({
  stage: z.string(),
  step: z.number().int().optional(),
  total_steps: z.number().int().optional(),
  eta_s: z.number().optional(),
}).catchall(z.unknown());

/** A job as returned by `GET /v1/jobs/{id}` and in listings. */
export const JobView = z.object({
  id: z.uuid(),
  status: z.enum(JOB_STATUSES),
  method: z.string(),
  attempt: z.number().int(),
  max_attempts: z.number().int(),
  priority: z.number().int(),
  device: z.string(),
  progress: ProgressView.nullable(),
  latest_metrics: z.record(z.string(), z.number()).nullable(),
  error: z.string().nullable(),
  /** The name given at submit (`name` or `suffix`), or null. */
  name: z.string().nullable(),
  /** The metadata given at submit (`{}` when none). */
  metadata: z.record(z.string(), z.string()),
  /** The job's `spec.model.base` (what it trains), for listings. */
  model: z.string(),
  /**
   * The latest evaluation (`eval/<split>/success_rate` of the highest evaluated step), or null
   * before the first; with `error`, what a listing shows of the outcome.
   */
  result: z.object({
    step: z.number().int(),
    success_rate: z.record(z.string(), z.number()),
  }).nullable(),
  created_at: z.string(),
  queued_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  /** The JobSpec with every default filled in: what the job runs. */
  spec: z.record(z.string(), z.unknown()),
  /**
   * The JobSpec fields as `POST /v1/jobs` received them, defaults left out (labels apart); null
   * for a job submitted before the service kept them, or queued by the service itself rather than
   * through the API.
   */
  submitted_spec: z.record(z.string(), z.unknown()).nullable().describe(
    "The JobSpec fields as POST /v1/jobs received them (name, suffix and metadata apart), defaults left out: submit it (edited) to copy the job with its defaults filled afresh. Null for a job submitted before the service kept it, or queued by the service itself rather than through the API.",
  ),
});
/** The wire type of {@link JobView}. */
export type JobView = z.infer<typeof JobView>;

/** One page of jobs; `next_cursor` is null on the last page. */
export const JobList = z.object({ jobs: z.array(JobView), next_cursor: z.string().nullable() });

/** One event of a job. */
export const EventView = z.object({
  id: z.number().int(),
  type: z.string(),
  attempt: z.number().int(),
  data: z.unknown(),
  created_at: z.string(),
});

/** A page of events; pass `next_after` as `?after=` for the next one (null when none yet). */
export const EventPage = z.object({
  events: z.array(EventView),
  next_after: z.number().int().nullable(),
  terminal: z.boolean(),
});

/** The metrics series of a job: one point per step. */
export const MetricsSeries = z.object({
  /** Metric names present in any step, sorted. */
  names: z.array(z.string()),
  points: z.array(z.object({
    step: z.number().int(),
    attempt: z.number().int(),
    created_at: z.string(),
    values: z.record(z.string(), z.number()),
  })),
});

/** One file of a checkpoint. */
export const CheckpointFileView = z.object({
  name: z.string(),
  bytes: z.number().int(),
  sha256: z.string(),
});

/** A checkpoint of a job. */
export const CheckpointView = z.object({
  step: z.number().int(),
  attempt: z.number().int(),
  bytes: z.number().int(),
  created_at: z.string(),
  files: z.array(CheckpointFileView),
});

/** `GET /v1/jobs/{id}/checkpoints`. */
export const CheckpointList = z.object({ checkpoints: z.array(CheckpointView) });

/** JSON answer of a single-file download with `?redirect=false`. */
export const PresignedUrl = z.object({ url: z.string(), expires_at: z.string() });

/** `POST /v1/models` query. */
export const UploadModelQuery = z.object({
  name: z.string().min(1).max(200)
    // deno-lint-ignore no-control-regex
    .regex(/^[^\u0000-\u001f\u007f]*$/, {
      message: "Cannot use this name as it must not hold control characters (NUL, newline, ESC, …)",
    })
    .optional().describe("A label for the model (1-200 characters, no control characters)"),
}).strict();

/** An uploaded model as returned by `GET /v1/models/{id}` and in listings. */
export const ModelView = z.object({
  id: z.uuid(),
  /** What a JobSpec names it by: `model:<id>` (`model.base`). */
  base: z.string().describe("What a JobSpec names it by (model.base): model:<id>"),
  name: z.string().nullable(),
  /** `architectures[0]` of its config.json, e.g. `Qwen3ForCausalLM`. */
  architecture: z.string(),
  parameter_count: z.number().int(),
  /** Bytes of the kept files together. */
  bytes: z.number().int(),
  files: z.array(CheckpointFileView),
  /** Its `config.json` as uploaded. */
  config: z.record(z.string(), z.unknown()),
  created_at: z.string(),
});
/** The wire type of {@link ModelView}. */
export type ModelView = z.infer<typeof ModelView>;

/** `POST /v1/models`: the model and the archive entries it skipped (not used by the service). */
export const ModelUploadView = ModelView.extend({
  /** The first 100 archive entries skipped (not used by the service), in archive order. */
  skipped_files: z.array(z.string()),
  /** How many entries were skipped in all. */
  skipped_file_count: z.number().int(),
});

/** `GET /v1/models`: the tenant's models, newest first. */
export const ModelList = z.object({ models: z.array(ModelView) });

/** `GET /v1/jobs/{id}/skills`: the library's metadata and its JSON contents. */
export const SkillsView = z.object({
  step: z.number().int(),
  attempt: z.number().int(),
  skill_count: z.number().int(),
  sha256: z.string(),
  created_at: z.string(),
  library: z.unknown(),
});

/**
 * One environment offered by the workers (jobs/env_catalog.ts `EnvCatalogEntry`, or what the env
 * provider given to `createApp` lists).
 */
export const EnvInfo = z.object({
  id: z.string(),
  description: z.string().optional(),
  /** JSON Schema (draft 2020-12) of `env.options`; submitted options are checked against it. */
  options_schema: z.record(z.string(), z.unknown()).optional(),
  /** The options used when none are given. */
  defaults: z.record(z.string(), z.unknown()).optional(),
  splits: z.array(z.object({ name: z.string(), description: z.string() })),
  families: z.array(z.string()).optional(),
  /** Default turn limit per episode (JobSpec `env.max_turns`). */
  default_max_turns: z.number().int().optional(),
  /**
   * Whether it has a reference analyzer (JobSpec `seed.skill_source: "reference"` needs `true`).
   */
  reference_analyzer: z.boolean().optional(),
}).catchall(z.unknown());
/** The wire type of {@link EnvInfo}. */
export type EnvInfo = z.infer<typeof EnvInfo>;

/** `GET /v1/envs`. */
export const EnvList = z.object({ envs: z.array(EnvInfo) });

/** The body of `PUT /v1/secrets/{name}`: the value, 1–8192 UTF-8 bytes (stored encrypted). */
export const PutSecretBody = z.object({
  value: z.string().min(1).refine(
    (v) => new TextEncoder().encode(v).length <= MAX_SECRET_VALUE_BYTES,
    { message: `Cannot store this value as it must be at most ${MAX_SECRET_VALUE_BYTES} bytes` },
  ),
}).strict();

/** A tenant secret as every answer shows it: name and dates, never the value. */
export const SecretView = z.object({
  name: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** `GET /v1/secrets`: the tenant's secrets by name. */
export const SecretList = z.object({ secrets: z.array(SecretView) });

/** Field issue of a validation problem. */
export const FieldIssueView = z.object({ path: z.string(), code: z.string(), message: z.string() });

/** `application/problem+json` body of every error. */
export const ProblemView = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  errors: z.array(FieldIssueView).optional(),
});

/** Task splits a trajectory can come from. */
export const SPLIT_NAMES = ["train", "test_seen", "test_unseen"] as const;

/**
 * `GET /v1/jobs/{id}/trajectories` query: without `step`, the steps that have trajectories;
 * with it, that step's trajectories, optionally of one `split`.
 */
export const TrajectoriesQuery = z.object({
  step: StepParam.optional(),
  split: z.enum(SPLIT_NAMES).optional(),
}).strict().refine((q) => q.split === undefined || q.step !== undefined, {
  // The step listing has no trajectories to filter: a split there was silently ignored.
  path: ["split"],
  message: "split filters one step's trajectories, so it needs step",
});

/** One dump of a step in the trajectory listing. */
export const TrajectoryDumpView = z.object({
  attempt: z.number().int(),
  /** Trajectories stored (after the size bound). */
  trajectories: z.number().int(),
  images: z.number().int(),
  bytes: z.number().int(),
  sha256: z.string(),
  created_at: z.string(),
});

/** `GET /v1/jobs/{id}/trajectories` without `step`: the steps that have trajectories. */
export const TrajectoryStepList = z.object({
  steps: z.array(z.object({
    step: z.number().int(),
    /** The update's training rollouts (none at step 0). */
    rollout: TrajectoryDumpView.nullable(),
    /** The step's evaluation (only at eval steps). */
    eval: TrajectoryDumpView.nullable(),
  })),
});

/** An observation image of a turn: where to GET it (a path under the API) and what it is. */
export const TrajectoryImageView = z.object({
  name: z.string(),
  /** `/v1/jobs/{id}/trajectories/{step}/images/{name}` (same bearer key). */
  url: z.string(),
  width: z.number().int(),
  height: z.number().int(),
  bytes: z.number().int(),
  sha256: z.string(),
});

/** One turn of a trajectory. */
export const TrajectoryTurnView = z.object({
  turn: z.number().int(),
  observation: z.string(),
  response: z.string(),
  action: z.string(),
  valid: z.boolean(),
  reward: z.number(),
  image: TrajectoryImageView.nullable(),
  /** What the action did, as the environment said it (the analyzer's `Effect:` line), if it did. */
  feedback: z.string().optional(),
}).catchall(z.unknown());

/** One trajectory of a step (`source`: `rollout` = training, `eval` = evaluation). */
export const TrajectoryView = z.object({
  source: z.enum(["rollout", "eval"]),
  id: z.string(),
  task_id: z.string(),
  split: z.string(),
  family: z.string(),
  instruction: z.string(),
  /** Group (task) index within the step. */
  group: z.number().int(),
  /** Copy within the group. */
  copy: z.number().int(),
  won: z.boolean(),
  score: z.number(),
  reward_sum: z.number(),
  turns: z.number().int(),
  truncated: z.boolean(),
  steps: z.array(TrajectoryTurnView),
}).catchall(z.unknown());

/** `GET /v1/jobs/{id}/trajectories?step=N`. */
export const TrajectoriesView = z.object({
  step: z.number().int(),
  /** The `split` filter, or null. */
  split: z.enum(SPLIT_NAMES).nullable(),
  /** Trajectories played at the step before the size bound, per source (null: none dumped). */
  totals: z.object({ rollout: z.number().int().nullable(), eval: z.number().int().nullable() }),
  /** Per-split evaluation results of the step (evaluate.ts `SplitEval`), or null. */
  eval: z.array(z.record(z.string(), z.unknown())).nullable(),
  trajectories: z.array(TrajectoryView),
});
