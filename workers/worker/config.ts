/**
 * Worker configuration from the environment, validated once where it enters.
 *
 * | variable             | default                         | meaning                              |
 * | -------------------- | ------------------------------- | ------------------------------------ |
 * | `WORKER_DEVICE`      | `cpu`                           | device class of jobs to claim        |
 * | `WORKER_ID`          | `worker-<host>-<pid>-<random>`  | unique id (part of every fence)      |
 * | `WORKER_LEASE_MS`    | `30000`                         | lease; heartbeat every lease / 3     |
 * | `WORKER_POLL_MS`     | `5000`                          | idle polling when no NOTIFY arrives  |
 * | `REAPER_INTERVAL_MS` | `5000`                          | reaper scan interval; 0 = no reaper  |
 * | `WORKER_RETRY_FOR_MS`| `600000`                        | how long a write waits out an outage |
 * | `WORKER_EXECUTION_PROVIDERS` | `cuda,webgpu,cpu` (gpu), `cpu` (cpu) | onnxruntime providers to try, best first |
 * | `WORKER_PREFIX_CACHE_MB` | `128` (`PREFIX_CACHE_BYTES`, workers/model/policy.ts) | MiB of prompt-prefix KV the trainer's teacher pass holds at once |
 * | `LOG_LEVEL`          | `info`                          | debug, info, warn or error (any case): the log's threshold (jobs/logger.ts) |
 *
 * An empty variable counts as unset. A bad value is a ZodError whose issues name the variable and
 * the rule it breaks; {@link workerConfigErrorMessage} makes it the one line the worker exits with
 * (`Cannot start the worker as WORKER_POLL_MS must be a whole number of ms from 10 to 600000:
 * current value is "5s"`, jobs/settings.ts).
 *
 * A `gpu` worker probes its execution providers once at start (workers/engine/providers.ts) and
 * uses the first that loads; leave `cpu` out of `WORKER_EXECUTION_PROVIDERS` to make a worker
 * without a working GPU provider refuse to start instead of running GPU jobs on its CPU. A `cpu`
 * worker only takes `cpu`: a GPU provider there would run `cpu` jobs on a GPU no job asked for.
 */
import { z } from "zod";
import {
  DEVICES,
  type LogLevel,
  LogLevelSetting,
  readSettings,
  settingsErrorMessage,
  wholeNumberSetting,
} from "../../jobs/mod.ts";
import { EXECUTION_PROVIDERS, type ExecutionProvider } from "../engine/mod.ts";

/** Most `WORKER_PREFIX_CACHE_MB` (64 GiB), as the inference server's `SERVE_PREFIX_CACHE_MB`. */
export const MAX_PREFIX_CACHE_MB = 65_536;

const PROVIDERS_RULE = `a comma-separated list of ${EXECUTION_PROVIDERS.join(", ")}`;

const ConfigSchema = z.object({
  WORKER_DEVICE: z.enum(DEVICES, { error: `one of ${DEVICES.join(", ")}` }).default("cpu"),
  WORKER_ID: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, {
    error: "1 to 128 letters, digits, dots, underscores, colons or hyphens",
  }).optional(),
  WORKER_LEASE_MS: wholeNumberSetting(300, 3_600_000, { unit: "ms" }).optional(),
  WORKER_POLL_MS: wholeNumberSetting(10, 600_000, { unit: "ms" }).optional(),
  REAPER_INTERVAL_MS: wholeNumberSetting(0, 3_600_000, { unit: "ms" }).optional(),
  WORKER_RETRY_FOR_MS: wholeNumberSetting(0, 86_400_000, { unit: "ms" }).optional(),
  WORKER_EXECUTION_PROVIDERS: z.string().optional()
    .transform((s) => s?.split(",").map((p) => p.trim()))
    .pipe(
      z.array(
        z.enum(EXECUTION_PROVIDERS as [ExecutionProvider, ...ExecutionProvider[]], {
          error: PROVIDERS_RULE,
        }),
        { error: PROVIDERS_RULE },
      ).min(1, { error: PROVIDERS_RULE })
        .refine((l) => new Set(l).size === l.length, {
          error: `${PROVIDERS_RULE} that names each provider once`,
        })
        .optional(),
    ),
  WORKER_PREFIX_CACHE_MB: wholeNumberSetting(0, MAX_PREFIX_CACHE_MB, { unit: "MiB" }).optional(),
  LOG_LEVEL: LogLevelSetting.default("info"),
}).superRefine((c, ctx) => {
  const gpuOnes = c.WORKER_EXECUTION_PROVIDERS?.filter((p) => p !== "cpu") ?? [];
  if (c.WORKER_DEVICE === "cpu" && gpuOnes.length > 0) {
    ctx.addIssue({
      code: "custom",
      path: ["WORKER_EXECUTION_PROVIDERS"],
      message: `cpu when WORKER_DEVICE is cpu (set WORKER_DEVICE=gpu to use ${gpuOnes.join(", ")})`,
    });
  }
});

/** Validated worker configuration. */
export interface WorkerConfig {
  device: "cpu" | "gpu";
  workerId?: string;
  leaseMs: number;
  pollMs: number;
  reaperIntervalMs: number;
  /** How long a write or an end-of-job transition is retried through an outage, in ms. */
  retryForMs: number;
  /**
   * onnxruntime providers to try, best first (`WORKER_EXECUTION_PROVIDERS`; default
   * cuda, webgpu, cpu for a gpu worker and cpu for a cpu worker).
   */
  executionProviders: ExecutionProvider[];
  /**
   * Most bytes of prompt-prefix KV caches the trainer's teacher pass holds at once
   * (`WORKER_PREFIX_CACHE_MB` × 2^20; `Policy.scoreSharedPrefixes`' `cacheBytes`). Undefined when
   * the variable is unset: the policy's default, `PREFIX_CACHE_BYTES` (128 MiB).
   */
  prefixCacheBytes?: number;
  /** The log's threshold (`LOG_LEVEL`, default info). */
  logLevel: LogLevel;
}

/**
 * Reads the worker's variables (table in the module doc).
 * @throws z.ZodError with an issue per invalid variable: its path begins with the variable's name,
 *   its message is the rule the value breaks (see {@link workerConfigErrorMessage}).
 */
export function workerConfigFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): WorkerConfig {
  const c = readSettings(ConfigSchema, env);
  return {
    device: c.WORKER_DEVICE,
    workerId: c.WORKER_ID,
    leaseMs: c.WORKER_LEASE_MS ?? 30_000,
    pollMs: c.WORKER_POLL_MS ?? 5_000,
    reaperIntervalMs: c.REAPER_INTERVAL_MS ?? 5_000,
    retryForMs: c.WORKER_RETRY_FOR_MS ?? 600_000,
    executionProviders: c.WORKER_EXECUTION_PROVIDERS ??
      (c.WORKER_DEVICE === "gpu" ? [...EXECUTION_PROVIDERS] : ["cpu"]),
    logLevel: c.LOG_LEVEL,
    ...(c.WORKER_PREFIX_CACHE_MB === undefined
      ? {}
      : { prefixCacheBytes: c.WORKER_PREFIX_CACHE_MB * 2 ** 20 }),
  };
}

/**
 * The one line a worker that cannot start logs for an error of {@link workerConfigFromEnv}:
 * `Cannot start the worker as LOG_LEVEL must be one of debug, info, warn, error: current value is
 * "debg"` (jobs/settings.ts `settingsErrorMessage`; each bad variable named once).
 */
export function workerConfigErrorMessage(
  error: z.ZodError,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): string {
  return settingsErrorMessage("the worker", error, env);
}
