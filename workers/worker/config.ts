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
 *
 * A `gpu` worker probes its execution providers once at start (workers/engine/providers.ts) and
 * uses the first that loads; leave `cpu` out of `WORKER_EXECUTION_PROVIDERS` to make a worker
 * without a working GPU provider refuse to start instead of running GPU jobs on its CPU. A `cpu`
 * worker only takes `cpu`: a GPU provider there would run `cpu` jobs on a GPU no job asked for.
 */
import { z } from "zod";
import { DEVICES } from "../../jobs/mod.ts";
import { EXECUTION_PROVIDERS, type ExecutionProvider } from "../engine/mod.ts";

/** Most `WORKER_PREFIX_CACHE_MB` (64 GiB), as the inference server's `SERVE_PREFIX_CACHE_MB`. */
export const MAX_PREFIX_CACHE_MB = 65_536;

/**
 * A variable holding a whole number of `unit` from `min` to `max`: decimal digits only (`1.5`,
 * `1e3`, `0x10`, `-1`, `abc` are refused, where `z.coerce.number` would read some of them and call
 * the others "NaN"). Unset stays undefined (the caller's default applies).
 */
function wholeNumber(unit: string, min: number, max: number) {
  return z.string().optional().superRefine((s, ctx) => {
    if (s === undefined || (/^[0-9]+$/.test(s) && Number(s) >= min && Number(s) <= max)) return;
    ctx.addIssue({
      code: "custom",
      message: `must be a whole number of ${unit} from ${min} to ${max}: current value is ${
        JSON.stringify(s)
      }`,
    });
  }).transform((s) => s === undefined ? undefined : Number(s));
}

const ConfigSchema = z.object({
  WORKER_DEVICE: z.enum(DEVICES).default("cpu"),
  WORKER_ID: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/).optional(),
  WORKER_LEASE_MS: wholeNumber("ms", 300, 3_600_000),
  WORKER_POLL_MS: wholeNumber("ms", 10, 600_000),
  REAPER_INTERVAL_MS: wholeNumber("ms", 0, 3_600_000),
  WORKER_RETRY_FOR_MS: wholeNumber("ms", 0, 86_400_000),
  WORKER_EXECUTION_PROVIDERS: z.string().optional()
    .transform((s) => s?.split(",").map((p) => p.trim()))
    .pipe(
      z.array(z.enum(EXECUTION_PROVIDERS as [ExecutionProvider, ...ExecutionProvider[]]), {
        error: "must be a comma-separated list of cuda, webgpu, cpu",
      }).min(1)
        .refine((l) => new Set(l).size === l.length, "must name each provider once")
        .optional(),
    ),
  WORKER_PREFIX_CACHE_MB: wholeNumber("MiB", 0, MAX_PREFIX_CACHE_MB),
}).superRefine((c, ctx) => {
  const gpuOnes = c.WORKER_EXECUTION_PROVIDERS?.filter((p) => p !== "cpu") ?? [];
  if (c.WORKER_DEVICE === "cpu" && gpuOnes.length > 0) {
    ctx.addIssue({
      code: "custom",
      path: ["WORKER_EXECUTION_PROVIDERS"],
      message: `must be cpu when WORKER_DEVICE is cpu (set WORKER_DEVICE=gpu to use ${
        gpuOnes.join(", ")
      })`,
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
}

/**
 * Reads the worker's variables (table in the module doc).
 * @throws z.ZodError naming the variable when a value is invalid.
 */
export function workerConfigFromEnv(
  env: Record<string, string | undefined> = Deno.env.toObject(),
): WorkerConfig {
  const pick = (k: string) => (env[k] === "" ? undefined : env[k]);
  const c = ConfigSchema.parse({
    WORKER_DEVICE: pick("WORKER_DEVICE"),
    WORKER_ID: pick("WORKER_ID"),
    WORKER_LEASE_MS: pick("WORKER_LEASE_MS"),
    WORKER_POLL_MS: pick("WORKER_POLL_MS"),
    REAPER_INTERVAL_MS: pick("REAPER_INTERVAL_MS"),
    WORKER_RETRY_FOR_MS: pick("WORKER_RETRY_FOR_MS"),
    WORKER_EXECUTION_PROVIDERS: pick("WORKER_EXECUTION_PROVIDERS"),
    WORKER_PREFIX_CACHE_MB: pick("WORKER_PREFIX_CACHE_MB"),
  });
  return {
    device: c.WORKER_DEVICE,
    workerId: c.WORKER_ID,
    leaseMs: c.WORKER_LEASE_MS ?? 30_000,
    pollMs: c.WORKER_POLL_MS ?? 5_000,
    reaperIntervalMs: c.REAPER_INTERVAL_MS ?? 5_000,
    retryForMs: c.WORKER_RETRY_FOR_MS ?? 600_000,
    executionProviders: c.WORKER_EXECUTION_PROVIDERS ??
      (c.WORKER_DEVICE === "gpu" ? [...EXECUTION_PROVIDERS] : ["cpu"]),
    ...(c.WORKER_PREFIX_CACHE_MB === undefined
      ? {}
      : { prefixCacheBytes: c.WORKER_PREFIX_CACHE_MB * 2 ** 20 }),
  };
}
