/**
 * The skill library (workers/seed/README.md, Algorithm, step 6): every parsed hindsight skill of a
 * job with its provenance, de-duplicated by normalised text, written with each checkpoint and read
 * back on resume. (SEED, Wu et al. 2026, arXiv 2607.14777, discards skills after re-scoring;
 * keeping them is this service's addition, for users to inspect and reuse.)
 *
 * The JSON form is the stored/served format (`…/skills/step-{N}.json`, `GET /v1/jobs/{id}/skills`)
 * and uses snake_case field names; it is validated with zod on the way in.
 */
import { z } from "zod";
import type { SkillAnalysis, Trajectory } from "../envs/types.ts";
import { checkNumber, SkillError } from "../seed/errors.ts";

/** Who wrote a skill: the policy's analyzer, or the environment's reference analyzer (oracle). */
export type SkillSource = "policy" | "reference";

/** Where one sighting of a skill came from. */
export interface SkillProvenance {
  jobId: string;
  /** Training update (step) at which the analyzer produced the skill. */
  step: number;
  taskId: string;
  /**
   * Task family of the trajectory (`Task.family`); absent in libraries written before it was kept.
   */
  family?: string;
  trajectoryId: string;
  /** Whether the analysed trajectory was won. */
  success: boolean;
  /**
   * Mean teacher gap Δ = ℓ_T − ℓ_old over the response tokens of the trajectory's turns scored
   * under this skill (nats; turns scored under a critical-step skill are not counted); null if
   * none.
   */
  meanTeacherGap: number | null;
  /**
   * Who wrote it (JobSpec `seed.skill_source`); absent in libraries written before it was kept,
   * which were all the policy's.
   */
  source?: SkillSource;
}

/** One de-duplicated skill. */
export interface SkillRecord {
  /** The text as first seen (whitespace collapsed). */
  text: string;
  /** Normalised text: the de-duplication key (see `normalizeSkill`). */
  key: string;
  /** Episode summary of the first sighting ("" when none). */
  summary: string;
  /** Sightings in total (provenance may keep fewer, see `maxProvenance`). */
  timesSeen: number;
  successCount: number;
  failureCount: number;
  firstStep: number;
  lastStep: number;
  /** Mean of the sightings' non-null `meanTeacherGap` (nats), null when none had one. */
  meanTeacherGap: number | null;
  /** Sightings with a teacher gap (the divisor of `meanTeacherGap`). */
  gapCount: number;
  /** The most recent sightings, oldest first. */
  provenance: SkillProvenance[];
}

/**
 * Orderings of `SkillLibrary.top`: most seen, largest mean Δ, most recent, highest success share.
 */
export type SkillRanking = "timesSeen" | "meanTeacherGap" | "lastStep" | "successRate";

/**
 * The de-duplication key: lowercase, whitespace collapsed, punctuation and spaces stripped at both
 * ends (inner punctuation is kept: "push up, then left" ≠ "push up then left" is accepted).
 */
export function normalizeSkill(text: string): string {
  return text.toLowerCase().replace(/\s+/g, " ").replace(/^[\p{P}\p{S}\s]+|[\p{P}\p{S}\s]+$/gu, "");
}

const provenanceJson = z.object({
  job_id: z.string().max(200),
  step: z.number().int().min(0),
  task_id: z.string().max(500),
  family: z.string().max(200).optional(),
  trajectory_id: z.string().max(500),
  success: z.boolean(),
  mean_teacher_gap: z.number().nullable(),
  source: z.enum(["policy", "reference"]).optional(),
});

const skillJson = z.object({
  text: z.string().min(1).max(4000),
  summary: z.string().max(8000),
  times_seen: z.number().int().min(1),
  success_count: z.number().int().min(0),
  failure_count: z.number().int().min(0),
  first_step: z.number().int().min(0),
  last_step: z.number().int().min(0),
  mean_teacher_gap: z.number().nullable(),
  gap_count: z.number().int().min(0),
  provenance: z.array(provenanceJson).max(10000),
});

/** zod schema of the stored library, version 1. */
export const skillLibraryJson = z.object({
  version: z.literal(1),
  job_id: z.string().max(200),
  step: z.number().int().min(0),
  skills: z.array(skillJson).max(1_000_000),
});

/** The stored library (snake_case, version 1). */
export type SkillLibraryJson = z.infer<typeof skillLibraryJson>;

/** Options of `SkillLibrary`. */
export interface SkillLibraryOptions {
  /** Sightings kept per skill (the most recent ones); counts always include all. Default 32. */
  maxProvenance?: number;
}

/** A job's skills, de-duplicated by `normalizeSkill`, with provenance and counts. */
export class SkillLibrary {
  readonly jobId: string;
  /** Latest step recorded (the `step` written by `toJSON`). */
  step = 0;
  readonly #maxProvenance: number;
  readonly #records = new Map<string, SkillRecord>();

  constructor(jobId: string, options: SkillLibraryOptions = {}) {
    this.jobId = jobId;
    this.#maxProvenance = options.maxProvenance ?? 32;
    checkNumber("maxProvenance", this.#maxProvenance, { min: 1, integer: true });
  }

  /** Number of distinct skills. */
  get size(): number {
    return this.#records.size;
  }

  /**
   * Records one sighting of `skill` (with optional episode summary). Returns whether the skill
   * was new and its record. Throws `SkillError` when the skill normalises to "".
   */
  add(
    skill: string,
    provenance: Omit<SkillProvenance, "jobId"> & { jobId?: string },
    summary = "",
  ): { added: boolean; record: SkillRecord } {
    const text = skill.replace(/\s+/g, " ").trim();
    const key = normalizeSkill(text);
    if (key === "") {
      throw new SkillError(
        `Cannot add a skill as it must have text after normalisation: current value is ${
          JSON.stringify(skill)
        }`,
      );
    }
    const sighting: SkillProvenance = { ...provenance, jobId: provenance.jobId ?? this.jobId };
    this.step = Math.max(this.step, sighting.step);
    const existing = this.#records.get(key);
    const record: SkillRecord = existing ?? {
      text,
      key,
      summary: summary.trim(),
      timesSeen: 0,
      successCount: 0,
      failureCount: 0,
      firstStep: sighting.step,
      lastStep: sighting.step,
      meanTeacherGap: null,
      gapCount: 0,
      provenance: [],
    };
    record.timesSeen += 1;
    if (sighting.success) record.successCount += 1;
    else record.failureCount += 1;
    record.firstStep = Math.min(record.firstStep, sighting.step);
    record.lastStep = Math.max(record.lastStep, sighting.step);
    if (sighting.meanTeacherGap !== null && Number.isFinite(sighting.meanTeacherGap)) {
      const total = (record.meanTeacherGap ?? 0) * record.gapCount + sighting.meanTeacherGap;
      record.gapCount += 1;
      record.meanTeacherGap = total / record.gapCount;
    }
    record.provenance.push(sighting);
    if (record.provenance.length > this.#maxProvenance) record.provenance.shift();
    if (!existing) this.#records.set(key, record);
    return { added: !existing, record };
  }

  /** The record whose normalised text equals `normalizeSkill(skill)`, if any. */
  get(skill: string): SkillRecord | undefined {
    return this.#records.get(normalizeSkill(skill));
  }

  /** All records in insertion order. */
  all(): SkillRecord[] {
    return [...this.#records.values()];
  }

  /**
   * The `n` best records by `by` (descending; ties by times seen, then first insertion).
   * Records without a teacher gap sort last under `meanTeacherGap`.
   */
  top(n: number, by: SkillRanking = "timesSeen"): SkillRecord[] {
    checkNumber("n", n, { min: 0, integer: true });
    const value = (r: SkillRecord): number => {
      switch (by) {
        case "timesSeen":
          return r.timesSeen;
        case "meanTeacherGap":
          return r.meanTeacherGap ?? -Infinity;
        case "lastStep":
          return r.lastStep;
        case "successRate":
          return r.successCount / r.timesSeen;
      }
    };
    return this.all()
      .map((record, order) => ({ record, order }))
      .sort((a, b) =>
        value(b.record) - value(a.record) || b.record.timesSeen - a.record.timesSeen ||
        a.order - b.order
      )
      .slice(0, n)
      .map((x) => x.record);
  }

  /** The stored form (version 1), at `step` (default: the latest step recorded). */
  toJSON(step: number = this.step): SkillLibraryJson {
    return {
      version: 1,
      job_id: this.jobId,
      step,
      skills: this.all().map((r) => ({
        text: r.text,
        summary: r.summary,
        times_seen: r.timesSeen,
        success_count: r.successCount,
        failure_count: r.failureCount,
        first_step: r.firstStep,
        last_step: r.lastStep,
        mean_teacher_gap: r.meanTeacherGap,
        gap_count: r.gapCount,
        provenance: r.provenance.map((p) => ({
          job_id: p.jobId,
          step: p.step,
          task_id: p.taskId,
          ...(p.family !== undefined ? { family: p.family } : {}),
          trajectory_id: p.trajectoryId,
          success: p.success,
          mean_teacher_gap: p.meanTeacherGap,
          ...(p.source !== undefined ? { source: p.source } : {}),
        })),
      })),
    };
  }

  /**
   * Reads a stored library (e.g. from a checkpoint, for resume). Throws `SkillError` (with the zod
   * error as `cause`) when `json` does not match version 1 of the format or repeats a skill.
   */
  static fromJSON(json: unknown, options: SkillLibraryOptions = {}): SkillLibrary {
    const parsed = skillLibraryJson.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new SkillError(
        `Cannot read the skill library as it must match version 1 of the format: ${
          issue.path.join(".") || "(root)"
        } ${issue.message}`,
        { cause: parsed.error },
      );
    }
    const data = parsed.data;
    const library = new SkillLibrary(data.job_id, options);
    library.step = data.step;
    for (const s of data.skills) {
      const key = normalizeSkill(s.text);
      if (key === "" || library.#records.has(key)) {
        throw new SkillError(
          `Cannot read the skill library as its skills must be distinct and non-empty: current value is ${
            JSON.stringify(s.text)
          }`,
        );
      }
      library.#records.set(key, {
        text: s.text,
        key,
        summary: s.summary,
        timesSeen: s.times_seen,
        successCount: s.success_count,
        failureCount: s.failure_count,
        firstStep: s.first_step,
        lastStep: s.last_step,
        meanTeacherGap: s.mean_teacher_gap,
        gapCount: s.gap_count,
        provenance: s.provenance.slice(-library.#maxProvenance).map((p) => ({
          jobId: p.job_id,
          step: p.step,
          taskId: p.task_id,
          ...(p.family !== undefined ? { family: p.family } : {}),
          trajectoryId: p.trajectory_id,
          success: p.success,
          meanTeacherGap: p.mean_teacher_gap,
          ...(p.source !== undefined ? { source: p.source } : {}),
        })),
      });
    }
    return library;
  }
}

/**
 * Adds every parsed skill of this step to the library with provenance (workers/seed/README.md,
 * Algorithm, step 6). `meanGaps` holds the mean teacher gap Δ per trajectory id (see
 * workers/seed/samples.ts `meanPerTrajectory`); missing ids get null. Returns how many skills were
 * new to the library.
 */
export function recordSkills(
  library: SkillLibrary,
  input: {
    step: number;
    trajectories: readonly (Trajectory & { id: string })[];
    analyses: ReadonlyMap<string, SkillAnalysis | null>;
    meanGaps?: ReadonlyMap<string, number>;
    /** Who wrote the skills (JobSpec `seed.skill_source`); default `policy`. */
    source?: SkillSource;
  },
): number {
  let added = 0;
  for (const t of input.trajectories) {
    const analysis = input.analyses.get(t.id);
    if (!analysis) continue;
    const result = library.add(analysis.episode_skill, {
      step: input.step,
      taskId: t.task.id,
      family: t.task.family,
      trajectoryId: t.id,
      success: t.won,
      meanTeacherGap: input.meanGaps?.get(t.id) ?? null,
      source: input.source ?? "policy",
    }, analysis.episode_summary);
    if (result.added) added++;
  }
  return added;
}
