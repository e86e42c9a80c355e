/**
 * The end of `deno task demo`: download the job's final checkpoint (tar archive, every file's
 * SHA-256 checked against the archive's `SHA256SUMS` and the checkpoint listing) and skill
 * library through the API into an output folder, then render the summary: evaluation before and
 * after RL, a few learned skills with provenance, where the files are, and the curl commands
 * that do the same by hand.
 */
import { join } from "node:path";
import { ApiError, type SeedClient } from "../client/mod.ts";
import type { JobWire, MetricsWire } from "./progress.ts";
import { percent } from "./progress.ts";
import { type ExtractedFile, extractVerified } from "../client/mod.ts";
import {
  claimOutputFolder,
  type OutputFolder,
  PARTIAL_FOLDER,
  publishDownload,
  releaseOutputFolder,
} from "./output_folder.ts";

/** Thrown when the job left nothing to download, or a downloaded file fails its check. */
export class DemoDownloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DemoDownloadError";
  }
}

/** What {@link downloadArtifacts} wrote. */
export interface DemoArtifacts {
  /** The output folder. */
  outDir: string;
  /** Checkpoint step downloaded (the latest). */
  step: number;
  /** Checkpoint files (paths under `outDir/checkpoint/step-N/`), SHA-256 verified. */
  files: ExtractedFile[];
  /** The folder holding `SHA256SUMS` and `step-N/` (`sha256sum -c SHA256SUMS` works there). */
  checkpointDir: string;
  /** `skills.json`: the library as stored (`{version, job_id, step, skills}`); null when none. */
  skillsPath: string | null;
  /** The library's parsed JSON; null when the job wrote none (`grpo` analyses nothing). */
  library: SkillLibraryWire | null;
  /** `metrics.csv` and `metrics.json`. */
  metricsCsvPath: string;
  metrics: MetricsWire;
  /**
   * The folder asked for when it was not free as the run started (it held an earlier run's
   * output, another run's unfinished download, or is a file), which is kept (`outDir` is then the
   * next free `<asked>-N`); otherwise null.
   */
  passedOver: string | null;
}

/** One skill as stored (version 1; `skill` accepted as an alias of `text`). */
export interface SkillWire {
  text?: string;
  skill?: string;
  times_seen?: number;
  success_count?: number;
  failure_count?: number;
  first_step?: number;
  mean_teacher_gap?: number | null;
  provenance?: {
    step?: number;
    task_id?: string;
    trajectory_id?: string;
    success?: boolean;
    mean_teacher_gap?: number | null;
  }[];
}

/** The stored skill library. */
export interface SkillLibraryWire {
  version: number;
  job_id: string;
  step: number;
  skills: SkillWire[];
}

type CheckpointList = {
  checkpoints: { step: number; files: { name: string; bytes: number; sha256: string }[] }[];
};

/**
 * Downloads the latest checkpoint, the latest skill library, the metrics and the final job into
 * the output folder's `.demo-partial/`, checks every file, then moves them into the folder
 * ({@link publishDownload}). `outDir` is the folder asked for, taken here with
 * {@link claimOutputFolder} (it, or the next free `<outDir>-N` when it is not free: an earlier
 * run's output is kept), or a folder the caller took earlier with it (the demo does, to name the
 * folder in its first lines). Also writes `spec.json` (what was submitted). On failure the folder
 * is given back ({@link releaseOutputFolder}). Throws {@link DemoDownloadError} (no checkpoints,
 * hash mismatch), the client's `ApiError`/`ArchiveError`, or the file system's error.
 */
export async function downloadArtifacts(
  client: SeedClient,
  job: JobWire,
  options: { outDir: string | OutputFolder; spec: unknown },
): Promise<DemoArtifacts> {
  const jobPath = `/v1/jobs/${encodeURIComponent(job.id)}`;
  let folder = typeof options.outDir === "string" ? null : options.outDir;
  try {
    const { checkpoints } = await client.json<CheckpointList>(`${jobPath}/checkpoints`);
    if (checkpoints.length === 0) {
      throw new DemoDownloadError(`Cannot download job ${job.id} as it has no checkpoints`);
    }
    const latest = checkpoints.reduce((a, b) => (b.step > a.step ? b : a));
    folder ??= await claimOutputFolder(options.outDir as string);
    const partial = join(folder.path, PARTIAL_FOLDER);
    const checkpointDir = join(partial, "checkpoint");
    const res = await client.fetch(`${jobPath}/checkpoints/${latest.step}/archive`);
    const files = await extractVerified(res.body!, checkpointDir);
    for (const listed of latest.files) {
      const got = files.find((f) => f.name === `step-${latest.step}/${listed.name}`);
      if (!got || got.sha256 !== listed.sha256) {
        throw new DemoDownloadError(
          `Cannot accept checkpoint file ${listed.name} as its sha256 must be ${listed.sha256} (the checkpoint listing): current value is ${
            got?.sha256 ?? "missing"
          }`,
        );
      }
    }
    await Deno.writeTextFile(
      join(checkpointDir, "SHA256SUMS"),
      files.map((f) => `${f.sha256}  ${f.name}\n`).join(""),
    );
    const library = await latestLibrary(client, jobPath);
    if (library) {
      await Deno.writeTextFile(
        join(partial, "skills.json"),
        JSON.stringify(library, null, 2) + "\n",
      );
    }
    const metrics = await client.json<MetricsWire>(`${jobPath}/metrics`);
    await Deno.writeTextFile(join(partial, "metrics.json"), JSON.stringify(metrics, null, 2));
    const csv = await (await client.fetch(`${jobPath}/metrics?format=csv`)).text();
    await Deno.writeTextFile(join(partial, "metrics.csv"), csv);
    await Deno.writeTextFile(join(partial, "job.json"), JSON.stringify(job, null, 2) + "\n");
    await Deno.writeTextFile(
      join(partial, "spec.json"),
      JSON.stringify(options.spec, null, 2) + "\n",
    );
    await publishDownload(folder);
    const outDir = folder.path;
    const moved = (p: string) => outDir + p.slice(partial.length);
    return {
      outDir,
      step: latest.step,
      files: files.map((f) => ({ ...f, path: moved(f.path) })),
      checkpointDir: moved(checkpointDir),
      skillsPath: library ? join(outDir, "skills.json") : null,
      library,
      metricsCsvPath: join(outDir, "metrics.csv"),
      metrics,
      passedOver: folder.reason === null ? null : folder.asked,
    };
  } catch (error) {
    // The error that ended the download is the one to report, not a failure to clean up.
    if (folder) await releaseOutputFolder(folder).catch(() => {});
    throw error;
  }
}

/** The job's latest skill library, or null when it has none (HTTP 404). */
async function latestLibrary(
  client: SeedClient,
  jobPath: string,
): Promise<SkillLibraryWire | null> {
  try {
    return (await client.json<{ library: SkillLibraryWire }>(`${jobPath}/skills`)).library;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** Evaluation figures of one step: split → metric (`success_rate`, `score`) → value. */
export interface EvalPoint {
  step: number;
  splits: Record<string, Record<string, number>>;
}

/**
 * Evaluation points from a metrics series: every step with `eval/<split>/<metric>` values,
 * ascending by step. The first is "before RL" (step 0, after warm-up), the last "after".
 */
export function evalPoints(metrics: MetricsWire): EvalPoint[] {
  const out: EvalPoint[] = [];
  for (const p of [...metrics.points].sort((a, b) => a.step - b.step)) {
    const splits: Record<string, Record<string, number>> = {};
    for (const [name, value] of Object.entries(p.values)) {
      const m = name.match(/^eval\/([^/]+)\/(.+)$/);
      if (m) (splits[m[1]] ??= {})[m[2]] = value;
    }
    if (Object.keys(splits).length > 0) out.push({ step: p.step, splits });
  }
  return out;
}

function skillText(s: SkillWire): string {
  return (s.text ?? s.skill ?? "").trim();
}

/**
 * One line on where a skill came from: how often it was seen, won/lost, the step it was first
 * written (`first_step`: the library keeps only its newest provenance records), and one
 * trajectory it was written for (the oldest record kept; its id names its step).
 */
export function provenanceLine(s: SkillWire): string {
  const example = s.provenance?.[0];
  const parts: string[] = [];
  if (s.times_seen !== undefined) parts.push(`seen ${s.times_seen}×`);
  if (s.success_count !== undefined && s.failure_count !== undefined) {
    parts.push(`${s.success_count} won / ${s.failure_count} lost`);
  }
  const first = s.first_step ?? example?.step;
  if (first !== undefined) parts.push(`first at step ${first}`);
  if (example?.task_id) parts.push(`e.g. task ${example.task_id}`);
  if (example?.trajectory_id) parts.push(`trajectory ${example.trajectory_id}`);
  if (typeof s.mean_teacher_gap === "number") {
    parts.push(
      `mean teacher gap ${s.mean_teacher_gap >= 0 ? "+" : ""}${s.mean_teacher_gap.toFixed(3)} nats`,
    );
  }
  return parts.join(", ");
}

/** The `n` most-seen skills (ties: larger mean teacher gap first). */
export function topSkills(library: SkillLibraryWire, n: number): SkillWire[] {
  return [...library.skills]
    .filter((s) => skillText(s) !== "")
    .sort((a, b) =>
      (b.times_seen ?? 0) - (a.times_seen ?? 0) ||
      (b.mean_teacher_gap ?? -Infinity) - (a.mean_teacher_gap ?? -Infinity)
    )
    .slice(0, n);
}

/** Single-quotes `s` for a POSIX shell. */
function sh(s: string): string {
  return /^[A-Za-z0-9_./:@=-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The curl commands that repeat the demo by hand against `url` with `key` (exact values), then
 * the two variables the command-line client reads (`SEED_API_URL`, `SEED_API_KEY`) and one use.
 */
export function curlCommands(
  o: { url: string; key: string; jobId: string; step: number; specPath: string; skills?: boolean },
): string[] {
  const auth = `-H ${sh(`authorization: Bearer ${o.key}`)}`;
  const job = `${o.url}/v1/jobs/${o.jobId}`;
  return [
    `# submit the same spec (a new job)`,
    `curl -s -X POST ${o.url}/v1/jobs ${auth} -H 'content-type: application/json' -d @${
      sh(o.specPath)
    }`,
    `# status, progress and latest metrics`,
    `curl -s ${job} ${auth}`,
    `# live events (SSE; add -H 'Last-Event-ID: N' to resume after event N)`,
    `curl -N ${job}/events ${auth} -H 'accept: text/event-stream'`,
    `# metrics series as CSV`,
    `curl -s '${job}/metrics?format=csv' ${auth}`,
    `# the final checkpoint, then check every file against SHA256SUMS`,
    `mkdir -p ckpt && curl -s ${job}/checkpoints/${o.step}/archive ${auth} | tar x -C ckpt && (cd ckpt && sha256sum -c SHA256SUMS)`,
    ...(o.skills === false ? [] : [`# the skill library`, `curl -s ${job}/skills ${auth}`]),
    `# the same with the command-line client (api/README.md, Command-line client)`,
    `export SEED_API_URL=${sh(o.url)} SEED_API_KEY=${sh(o.key)}`,
    `npx -y deno@2.9.6 task seed -- status ${o.jobId}   # also: list, follow, metrics, download, skills`,
  ];
}

/** Inputs of {@link renderSummary}. */
export interface SummaryInput {
  job: JobWire;
  artifacts: DemoArtifacts;
  url: string;
  key: string;
  dataDir: string;
  /** Seconds the job took (submit → terminal). */
  seconds: number;
  /** Whether the services keep running after the summary (`--keep`). */
  keep: boolean;
}

/**
 * Half-width, in percentage points, of the 95% normal-approximation interval of a success rate
 * measured over `episodes` episodes: 196·√(p(1−p)/n), with p clamped to [1/n, 1 − 1/n] so a rate
 * of 0 or 1 still shows its uncertainty. E.g. 0.85 over 200 episodes → 4.9.
 * @throws RangeError when `episodes` is not a positive integer or `rate` is outside [0, 1].
 */
export function successInterval(rate: number, episodes: number): number {
  if (!Number.isInteger(episodes) || episodes < 1) {
    throw new RangeError(
      `Cannot compute the interval as episodes must be a positive integer: current value is ${episodes}`,
    );
  }
  if (!(rate >= 0 && rate <= 1)) {
    throw new RangeError(
      `Cannot compute the interval as rate must be in [0, 1]: current value is ${rate}`,
    );
  }
  const p = Math.min(Math.max(rate, 1 / episodes), 1 - 1 / episodes);
  return 196 * Math.sqrt((p * (1 - p)) / episodes);
}

function evalTable(points: EvalPoint[], episodes?: number): string[] {
  if (points.length === 0) return ["  (the job recorded no eval/<split>/… metrics)"];
  const first = points[0];
  const last = points[points.length - 1];
  const splits = [...new Set(points.flatMap((p) => Object.keys(p.splits)))].sort();
  const cell = (p: EvalPoint, split: string) => {
    const v = p.splits[split];
    if (!v) return "—";
    const ci = v.success_rate !== undefined && episodes !== undefined
      ? ` ±${successInterval(v.success_rate, episodes).toFixed(0)}`
      : "";
    const rate = v.success_rate === undefined ? "—" : percent(v.success_rate) + ci;
    return v.score === undefined ? rate : `${rate} (score ${+v.score.toFixed(3)})`;
  };
  const rows = [
    ["split", `before RL (step ${first.step})`, `after RL (step ${last.step})`],
    ...splits.map((split) => [
      split,
      cell(first, split),
      last === first ? "(no later evaluation)" : cell(last, split),
    ]),
  ];
  const widths = [0, 1].map((i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => `  ${r[0].padEnd(widths[0])}   ${r[1].padEnd(widths[1])}   ${r[2]}`);
}

/** Two columns, the first padded to its widest cell, indented by two spaces. */
function table(rows: string[][]): string[] {
  const width = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([a, b]) => `  ${a.padEnd(width)}  ${b}`);
}

/** How the job evaluates: "greedy" at temperature 0, else the sampling temperature. */
function evalMode(job: JobWire): string {
  const t = job.spec?.eval?.temperature;
  return t === undefined ? "as the spec says" : t === 0 ? "greedy" : `sampled at temperature ${t}`;
}

/** The web dashboard's page of job `jobId` on the API at `url` (api/dashboard/routes.ts). */
export function dashboardUrl(url: string, jobId: string): string {
  return `${url.replace(/\/+$/, "")}/#/jobs/${jobId}`;
}

/** The summary printed at the end of a successful demo run. */
export function renderSummary(input: SummaryInput): string {
  const { artifacts: a, job } = input;
  const port = new URL(input.url).port;
  const episodes = job.spec?.eval?.episodes;
  const lines = [
    "",
    `Job ${job.id} succeeded in ${Math.round(input.seconds)} s.`,
    `Dashboard: ${dashboardUrl(input.url, job.id)} (sign in with this run's key, below${
      input.keep ? "" : "; the API stops with the demo: run it with --keep to browse"
    })`,
    "",
    `Evaluation success rate (${evalMode(job)}${
      episodes === undefined ? "" : `, ${episodes} episodes per split, ± = 95% interval`
    }):`,
    ...evalTable(evalPoints(a.metrics), episodes),
    "",
  ];
  if (a.library) {
    lines.push(
      `Skill library: ${a.library.skills.length} skill${
        a.library.skills.length === 1 ? "" : "s"
      } at step ${a.library.step}. Most seen:`,
    );
    const top = topSkills(a.library, 3);
    if (top.length === 0) lines.push("  (no skill parsed yet)");
    top.forEach((s, i) => lines.push(`  ${i + 1}. ${skillText(s)}`, `     ${provenanceLine(s)}`));
  } else lines.push("Skill library: none (this method analyses no trajectories).");
  lines.push(
    "",
    `Files${
      a.passedOver ? ` (${a.passedOver}/ was not free when this run started and is kept)` : ""
    }:`,
    ...table([
      [
        `${a.checkpointDir}/step-${a.step}/`,
        `checkpoint (Hugging Face format), ${a.files.length} files, sha256 verified`,
      ],
      [
        `${a.checkpointDir}/SHA256SUMS`,
        `check again: (cd ${a.checkpointDir} && sha256sum -c SHA256SUMS)`,
      ],
      ...(a.skillsPath ? [[a.skillsPath, "skill library"]] : []),
      [a.metricsCsvPath, "every step's metrics (also metrics.json, the API's JSON)"],
      [`${a.outDir}/job.json`, "the job as the API returned it at the end"],
      [`${a.outDir}/spec.json`, "the JobSpec that was submitted"],
      [`${input.dataDir}/`, "this run's database, object store and logs (api.log, worker.log)"],
    ]),
    "",
    `By hand (API at ${input.url}, this run's key and job):`,
  );
  if (!input.keep) {
    lines.push(
      `  # the services stop when the demo ends; to restart the API on this run's data:`,
      `  SEED_DATA_DIR=${sh(input.dataDir)} PORT=${port} npx -y deno@2.9.6 task api`,
    );
  }
  lines.push(
    `  # chat with the trained checkpoint (OpenAI-compatible, model job:${job.id}; workers/serve/README.md, "Running the server"):`,
    `  SEED_DATA_DIR=${sh(input.dataDir)} npx -y deno@2.9.6 task serve`,
  );
  lines.push(
    ...curlCommands({
      url: input.url,
      key: input.key,
      jobId: job.id,
      step: a.step,
      specPath: `${a.outDir}/spec.json`,
      skills: a.library !== null,
    }).map((l) => `  ${l}`),
  );
  return lines.join("\n") + "\n";
}
