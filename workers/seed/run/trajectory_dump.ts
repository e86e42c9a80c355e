/**
 * Trajectory dumps (workers/seed/README.md, "Trajectories and evaluations"): at every update the
 * trainer's rollouts, and at every evaluation the per-split results with the eval trajectories, are
 * written as one JSON object each through `ctx.saveTrajectories` (jobs/trajectories.ts:
 * attempt-scoped keys, the row under the fence is the commit point). An observation that carries an
 * image is stored as its own PNG object (`encodePng`) and referenced from its turn by name; the API
 * serves it at `GET /v1/jobs/{id}/trajectories/{step}/images/{name}`.
 *
 * Sizes are bounded ({@link DumpLimits}): the first `maxTrajectories` rollouts in (task, copy)
 * order (whole groups first), the first `maxPerSplit` eval episodes of each split, text fields
 * cut at `maxFieldChars`, and at most `maxImages` images per dump. The JSON (version 1):
 *
 * ```json
 * {"version": 1, "kind": "rollout", "job_id": "…", "step": 2, "total_trajectories": 32,
 *  "images_omitted": 0,
 *  "trajectories": [{"id": "step-2/b0g1", "task_id": "sokoban/train/17", "split": "train",
 *    "family": "sokoban", "instruction": "push the box onto the target", "group": 0, "copy": 1,
 *    "won": false, "score": -0.3, "reward_sum": -0.3, "turns": 3, "truncated": true,
 *    "steps": [{"turn": 1, "observation": "# # …", "response": "<action>up</action>",
 *      "action": "up", "valid": true, "reward": -0.1, "image": null}]}]}
 * ```
 *
 * A turn whose environment said what the action did (`TrajectoryStep.feedback`, e.g. Sokoban's
 * `"pushed the box up"`: the analyzer prompt's `Effect:` line) also has `"feedback"`; other turns
 * have no such key.
 *
 * An `eval` dump adds `"splits": [SplitEval…]` (../evaluate.ts: split, episodes, success_rate,
 * score, mean_turns, families).
 *
 * A rollout dump given the step's {@link DumpTeacher} (SEED jobs) also carries, on each analysed
 * trajectory, `"analysis": {"skill", "summary", "raw"}` (skill and summary null when the analyzer's
 * answer did not parse, summary also when it had none; `raw` is that answer), and on each
 * re-scored turn `"response_tokens": ["<action>", "up", …]` with `"teacher_gaps": [0.31, -0.02,
 * …]`: the sampled response tokens as text and, per token, the teacher gap Δ = ℓ_T − ℓ_old in
 * nats (workers/seed/README.md, Algorithm, step 4; > 0: the skill in the prompt made the token more
 * likely). A turn the teacher scored under a critical-step skill (`seed.max_step_skills`) instead
 * of the trajectory's episode skill also has `"step_skill": "…"`, that skill (the analysis' `raw`
 * holds every step skill the analyzer wrote, keyed by 0-based turn; `turn` here counts from 1).
 * Turns and trajectories without them have no such keys.
 */
import type { TrajectoryDumpInput, TrajectoryImageInput } from "../../../jobs/mod.ts";
import { encodePng, type RgbImage, type Task, type TrajectoryStep } from "../../envs/mod.ts";
import type { SplitEval } from "../evaluate.ts";
import type { StepTeacher } from "../trainer.ts";

/** A turn to dump: a rollout turn (`RolloutStep` fits), with the images its prompt showed. */
export interface DumpStep extends TrajectoryStep {
  /**
   * Images of the prompt (vision variants: one, the observation before acting); the first is
   * dumped.
   */
  images?: readonly RgbImage[];
  /** Remote rollout engines: the policy version that produced the response. */
  policyVersion?: number;
}

/** A trajectory to dump (a `RolloutTrajectory` fits). */
export interface DumpTrajectory {
  id: string;
  task: Task;
  /** Group (task) index within the step, 0..B−1. */
  taskIndex: number;
  /** Copy within the group, 0..G−1. */
  copyIndex: number;
  won: boolean;
  /** Episode score (env units: the reward sum, or the env's final score). */
  score: number;
  truncated: boolean;
  steps: readonly DumpStep[];
}

/** Size bounds of one dump (see module doc). */
export interface DumpLimits {
  /** Rollout trajectories kept per step (default 32). */
  maxTrajectories: number;
  /** Eval episodes kept per split (default 8). */
  maxPerSplit: number;
  /** Characters kept of each observation and response (default 4000). */
  maxFieldChars: number;
  /** PNG images per dump (default 256); later turns then carry `image: null`. */
  maxImages: number;
}

/** Default {@link DumpLimits}: a sokoban step of 32 trajectories × 20 turns is ≈ 150 KB. */
export const DEFAULT_DUMP_LIMITS: Readonly<DumpLimits> = {
  maxTrajectories: 32,
  maxPerSplit: 8,
  maxFieldChars: 4000,
  maxImages: 256,
};

/** What the analyze and re-score phases of a step learned, for its rollout dump. */
export interface DumpTeacher extends StepTeacher {
  /** Token ids → text (the policy's tokenizer). */
  decode(ids: readonly number[]): string;
}

/** One dumped turn (JSON). */
export interface DumpedStep {
  /** 1-based turn. */
  turn: number;
  observation: string;
  response: string;
  action: string;
  valid: boolean;
  reward: number;
  /** Name of the observation's PNG within the step, or null. */
  image: string | null;
  /** What the action did, as the environment said it (the analyzer's `Effect:` line), if it did. */
  feedback?: string;
  /** Remote rollout engines: the policy version (updates done) that produced the response. */
  policy_version?: number;
  /** Re-scored turns: the response tokens as text (T,). */
  response_tokens?: string[];
  /** Re-scored turns: Δ = ℓ_T − ℓ_old per response token (T,), nats, 4 decimals. */
  teacher_gaps?: number[];
  /** The critical-step skill the teacher scored this turn under (absent: the episode skill). */
  step_skill?: string;
}

/**
 * A trajectory's analysis as dumped (`skill`/`summary` null when the answer did not parse;
 * `summary` also null when it had none, as RL-time analyses have).
 */
export interface DumpedAnalysis {
  skill: string | null;
  summary: string | null;
  raw: string | null;
}

/** One dumped trajectory (JSON). */
export interface DumpedTrajectory {
  id: string;
  task_id: string;
  split: string;
  family: string;
  instruction: string;
  group: number;
  copy: number;
  won: boolean;
  score: number;
  /** Sum of the turns' rewards (equals `score` unless the env reports a final score). */
  reward_sum: number;
  turns: number;
  truncated: boolean;
  steps: DumpedStep[];
  /** Analysed trajectories of a SEED step. */
  analysis?: DumpedAnalysis;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Tokens of context {@link tokenPieces} decodes before each token (multi-byte characters). */
const PIECE_CONTEXT = 8;

/**
 * The text of each token of `ids` (T,) as it reads in the decoded response: piece i is
 * decode(ids[i−8 .. i]) minus decode(ids[i−8 .. i−1]), each without a trailing U+FFFD (the
 * replacement character of a character whose bytes are not all there yet), so a character
 * whose bytes span several byte-level tokens shows on the token that completes it (the others
 * get ""), and the pieces join to the decoded text. Falls back to decode([id]) where the prefix
 * does not match.
 */
export function tokenPieces(
  ids: readonly number[],
  decode: (ids: readonly number[]) => string,
): string[] {
  const incomplete = (text: string) => text.replace(/\uFFFD+$/u, "");
  return ids.map((_, i) => {
    const from = Math.max(0, i - PIECE_CONTEXT);
    const before = incomplete(decode(ids.slice(from, i)));
    const all = decode(ids.slice(from, i + 1));
    // The last token keeps a trailing U+FFFD: its bytes are invalid, not waiting for more.
    const upTo = i === ids.length - 1 ? all : incomplete(all);
    return upTo.startsWith(before) ? upTo.slice(before.length) : decode([ids[i]]);
  });
}

/** `teacher`'s analysis of trajectory `id` as dumped, or undefined when it was not analysed. */
function analysisOf(
  teacher: DumpTeacher | undefined,
  id: string,
  limits: DumpLimits,
): DumpedAnalysis | undefined {
  if (!teacher?.analyses.has(id)) return undefined;
  const a = teacher.analyses.get(id) ?? null;
  const raw = teacher.raw?.get(id);
  return {
    skill: a ? clip(a.episode_skill, limits.maxFieldChars) : null,
    summary: a && a.episode_summary !== "" ? clip(a.episode_summary, limits.maxFieldChars) : null,
    raw: raw === undefined ? null : clip(raw, limits.maxFieldChars),
  };
}

/**
 * The JSON entries and PNG images of `trajectories` (already bounded by the caller); images
 * are named `{kind}-{i}-{k}.png` (trajectory i of the dump, turn k, both 0-based).
 * @throws RasterError when an image's `rgb` does not hold width × height × 3 bytes.
 */
export function dumpEntries(
  kind: TrajectoryDumpInput["kind"],
  trajectories: readonly DumpTrajectory[],
  limits: DumpLimits,
  teacher?: DumpTeacher,
): { trajectories: DumpedTrajectory[]; images: TrajectoryImageInput[]; imagesOmitted: number } {
  const images: TrajectoryImageInput[] = [];
  let imagesOmitted = 0;
  const gapsOf = new Map(teacher?.tokenGaps.map((g) => [`${g.trajectoryId}#${g.turn}`, g]));
  const entries = trajectories.map((t, i): DumpedTrajectory => ({
    id: t.id,
    task_id: t.task.id,
    split: t.task.split,
    family: t.task.family,
    instruction: t.task.instruction,
    group: t.taskIndex,
    copy: t.copyIndex,
    won: t.won,
    score: t.score,
    reward_sum: t.steps.reduce((s, x) => s + x.reward, 0),
    turns: t.steps.length,
    truncated: t.truncated,
    steps: t.steps.map((s, k) => {
      let image: string | null = null;
      const shown = s.images?.[0];
      if (shown && images.length >= limits.maxImages) imagesOmitted++;
      else if (shown) {
        image = `${kind}-${i}-${k}.png`;
        const { width, height } = shown;
        images.push({ name: image, bytes: encodePng(shown), width, height });
      }
      const dumped: DumpedStep = {
        turn: k + 1,
        observation: clip(s.observation, limits.maxFieldChars),
        response: clip(s.response, limits.maxFieldChars),
        action: clip(s.action, limits.maxFieldChars),
        valid: s.valid,
        reward: s.reward,
        image,
        ...(s.feedback !== undefined ? { feedback: clip(s.feedback, limits.maxFieldChars) } : {}),
        ...(s.policyVersion !== undefined ? { policy_version: s.policyVersion } : {}),
      };
      const gap = gapsOf.get(`${t.id}#${k}`);
      if (gap && teacher) {
        // Bounded like the response text: at most maxFieldChars tokens.
        const ids = gap.responseIds.slice(0, limits.maxFieldChars);
        dumped.response_tokens = tokenPieces(ids, teacher.decode);
        dumped.teacher_gaps = Array.from(gap.gaps).slice(0, ids.length).map((x) =>
          Math.round(x * 1e4) / 1e4
        );
        if (gap.stepSkill !== undefined) {
          dumped.step_skill = clip(gap.stepSkill, limits.maxFieldChars);
        }
      }
      return dumped;
    }),
    ...(teacher?.analyses.has(t.id) ? { analysis: analysisOf(teacher, t.id, limits) } : {}),
  }));
  return { trajectories: entries, images, imagesOmitted };
}

/**
 * The `rollout` dump of update `step` (see module doc); `teacher` adds the analyses and the
 * per-token teacher gaps of a SEED step.
 */
export function rolloutDump(
  jobId: string,
  step: number,
  trajectories: readonly DumpTrajectory[],
  limits: DumpLimits = DEFAULT_DUMP_LIMITS,
  teacher?: DumpTeacher,
): TrajectoryDumpInput {
  const kept = trajectories.slice(0, limits.maxTrajectories);
  const d = dumpEntries("rollout", kept, limits, teacher);
  const json = {
    version: 1,
    kind: "rollout",
    job_id: jobId,
    step,
    total_trajectories: trajectories.length,
    images_omitted: d.imagesOmitted,
    trajectories: d.trajectories,
  };
  return { step, kind: "rollout", json, trajectoryCount: kept.length, images: d.images };
}

/** The `eval` dump of `step`: results per split and the first episodes of each split. */
export function evalDump(
  jobId: string,
  step: number,
  evaluation: { splits: readonly SplitEval[]; trajectories: readonly DumpTrajectory[] },
  limits: DumpLimits = DEFAULT_DUMP_LIMITS,
): TrajectoryDumpInput {
  const perSplit = new Map<string, number>();
  const kept = evaluation.trajectories.filter((t) => {
    const n = perSplit.get(t.task.split) ?? 0;
    perSplit.set(t.task.split, n + 1);
    return n < limits.maxPerSplit;
  });
  const d = dumpEntries("eval", kept, limits);
  const json = {
    version: 1,
    kind: "eval",
    job_id: jobId,
    step,
    splits: evaluation.splits,
    total_trajectories: evaluation.trajectories.length,
    images_omitted: d.imagesOmitted,
    trajectories: d.trajectories,
  };
  return { step, kind: "eval", json, trajectoryCount: kept.length, images: d.images };
}
