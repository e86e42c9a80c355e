/**
 * The HTTP environment protocol, version 1: zod schemas of every body, shared by server and
 * client. JSON field names are snake_case on the wire where they are ours (`episode_id`), and
 * the domain objects (Task, Observation, StepResult, Trajectory) keep their TypeScript names.
 *
 * Paths are relative to an environment's base URL (`http://host:port` when the server serves one
 * environment, `http://host:port/envs/{id}` always):
 *
 * | method | path                          | body → answer                                       |
 * |--------|-------------------------------|-----------------------------------------------------|
 * | GET    | /v1/info                      | → {@link InfoSchema}                                 |
 * | POST   | /v1/tasks                     | {split, count, seed, options?} → {tasks}             |
 * | POST   | /v1/episodes                  | {task, request_id?} → {episode_id, observation} (created, reset) |
 * | POST   | /v1/episodes/{id}/reset       | {} → {observation}                                   |
 * | POST   | /v1/episodes/{id}/step        | {action, seq?} → StepResult                          |
 * | DELETE | /v1/episodes/{id}             | → 204                                                |
 * | POST   | /v1/prompt                    | {input: PromptInput} → {prompt}                      |
 * | POST   | /v1/parse                     | {response} → {action: string or null}                |
 * | POST   | /v1/experts                   | {task, request_id?} → {expert_id}                    |
 * | POST   | /v1/experts/{id}/act          | {observation, seq?} → {action}                       |
 * | DELETE | /v1/experts/{id}              | → 204                                                |
 * | POST   | /v1/skilled-demonstrations    | {task, request_id?} → {skill, expert_id}             |
 * | POST   | /v1/analysis                  | {trajectory} → {episode_summary, episode_skill, step_skills?} |
 * | POST   | /v1/skill-judgement           | {trajectory, skill} → {well_formed, truthful, matches_reference?} |
 * | GET    | /v1/vocabulary                | → {words}                                            |
 *
 * `POST /v1/skill-judgement` is optional: a server serves it only when `GET /v1/info` answers
 * `skill_judge: true` (an environment with `judgeSkill`); a client of a server without it has no
 * `judgeSkill`, so the trainer reports no skill-quality metrics instead of failing. Its
 * `matches_reference` (the skill is the reference analysis' own) is absent from older servers,
 * whose `truthful` meant exactly that; the client then reads `truthful` for it.
 * `POST /v1/skilled-demonstrations` is optional too: served when `GET /v1/info` answers
 * `skilled_demonstration: true` (an environment with `skilledDemonstration`, e.g. household). It
 * answers the demonstration's skill and the id of its expert, a live expert like those of
 * `POST /v1/experts` (driven by `POST /v1/experts/{id}/act`, freed by `DELETE /v1/experts/{id}`);
 * a client of a server without it has no `skilledDemonstration`, so the warm-up shows the
 * ordinary expert's episodes with their own reference skill instead.
 *
 * `seq` (optional) is the number of steps/acts already applied; a retried request with the
 * previous `seq` gets the cached answer instead of acting twice, any other mismatch is a 409.
 * `request_id` (optional, a fresh random id per episode, expert or demonstration the client
 * wants) does the same for the three creates: a retried create whose first answer was lost (a
 * timeout, a dropped connection) gets that first answer, the same id, while it lives, instead of
 * a second episode or expert that nobody would drive or delete (it would hold one of the
 * server's `maxLive` places until it idled out). A create that repeats a live item's
 * `request_id` with another task is a 409 (the id was reused, not retried). A create that repeats
 * the `request_id` of an item already deleted or idled out is a 410 naming `request_id` (a late
 * duplicate: the server keeps such ids for its idle timeout after the item went, at most
 * `maxLive` of them), never a new item.
 * Errors are `application/problem+json`
 * `{type, title, status, detail, errors?: [{path, message}]}`; 4xx means the request was wrong
 * (never retried), 5xx the server failed (retried by the client). Observation images travel as
 * `{width, height, rgb_base64}` (RGB bytes, row-major, base64 with padding), at most
 * {@link MAX_IMAGE_BYTES} raw bytes, checked against width × height × 3 on both sides; an
 * environment served over HTTP therefore gives the same images as in process.
 */
import { z } from "zod";
import type { Observation } from "../types.ts";

/** Protocol version reported by `GET /v1/info`. */
export const PROTOCOL_VERSION = 1;

/** Largest request body the server reads (bytes). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

const uint32 = z.number().int().min(0).max(0xffffffff);
const shortText = z.string().max(200);
const longText = z.string().max(200_000);

/** Split names. */
export const SplitSchema = z.enum(["train", "test_seen", "test_unseen"]);

/** A task (as produced by `POST /v1/tasks`). */
export const TaskSchema = z.object({
  envId: shortText,
  id: shortText,
  split: SplitSchema,
  seed: uint32,
  family: shortText,
  instruction: z.string().max(2000),
  options: z.record(z.string(), z.unknown()),
});

/**
 * Largest observation image on the wire, in raw RGB bytes (2 MiB, e.g. 836 × 836; its base64,
 * 4/3 as long, still fits a request body of {@link MAX_BODY_BYTES}).
 */
export const MAX_IMAGE_BYTES = 2 * 1024 * 1024;

/** Characters of the base64 text of `bytes` bytes (with `=` padding). */
export function base64Length(bytes: number): number {
  return 4 * Math.ceil(bytes / 3);
}

/**
 * An image on the wire: RGB bytes (row-major, `height * width * 3`) in standard base64 with
 * padding. Checked: at most {@link MAX_IMAGE_BYTES} bytes, and the base64 decodes to exactly
 * `width * height * 3` bytes (a multiple of 3, so the text never ends in `=` padding).
 */
export const WireImageSchema = z.object({
  width: z.number().int().min(1).max(4096),
  height: z.number().int().min(1).max(4096),
  rgb_base64: z.string().max(base64Length(MAX_IMAGE_BYTES)).regex(/^[A-Za-z0-9+/]*={0,2}$/, {
    message: "must be standard base64",
  }),
}).superRefine((image, ctx) => {
  const bytes = image.width * image.height * 3;
  if (bytes > MAX_IMAGE_BYTES) {
    ctx.addIssue({
      code: "custom",
      path: ["width"],
      message:
        `width * height * 3 must be at most ${MAX_IMAGE_BYTES} bytes: current value is ${bytes}`,
    });
    return;
  }
  // width * height * 3 is a multiple of 3, so its base64 has no `=` padding: a padded text of
  // the right length decodes to 1 or 2 bytes too few (e.g. "AAAAAA==" is 4 bytes, not 6).
  if (image.rgb_base64.length !== base64Length(bytes) || image.rgb_base64.endsWith("=")) {
    ctx.addIssue({
      code: "custom",
      path: ["rgb_base64"],
      message: `must encode width * height * 3 = ${bytes} bytes in ${base64Length(bytes)} ` +
        `characters without padding: current length is ${image.rgb_base64.length}` +
        (image.rgb_base64.endsWith("=") ? " with padding" : ""),
    });
  }
});

/** An observation on the wire. */
export const WireObservationSchema = z.object({
  text: longText,
  admissibleActions: z.array(z.string().max(2000)).max(10_000).optional(),
  image: WireImageSchema.optional(),
});

/** A step result on the wire. */
export const WireStepResultSchema = z.object({
  observation: WireObservationSchema,
  reward: z.number(),
  done: z.boolean(),
  won: z.boolean(),
  valid: z.boolean(),
  info: z.record(z.string(), z.unknown()),
  feedback: z.string().max(2000).optional(),
});

/** One trajectory step. */
export const TrajectoryStepSchema = z.object({
  observation: longText,
  response: longText,
  action: z.string().max(2000),
  valid: z.boolean(),
  reward: z.number(),
  feedback: z.string().max(2000).optional(),
});

/** A whole trajectory. */
export const TrajectorySchema = z.object({
  task: TaskSchema,
  steps: z.array(TrajectoryStepSchema).max(1000),
  won: z.boolean(),
  score: z.number(),
});

/** Inputs of the prompt template. */
export const PromptInputSchema = z.object({
  task: TaskSchema,
  history: z.array(TrajectoryStepSchema).max(1000),
  observation: WireObservationSchema,
  historyLength: z.number().int().min(0).max(1000),
  turn: z.number().int().min(1).max(100_000),
});

/** `GET /v1/info`. */
export const InfoSchema = z.object({
  protocol_version: z.number().int(),
  id: shortText,
  description: z.string().max(10_000),
  options_schema: z.record(z.string(), z.unknown()),
  families: z.array(shortText),
  default_max_turns: z.number().int().min(1),
  splits: z.array(SplitSchema),
  /** True when `POST /v1/skill-judgement` is served; absent (older servers) means false. */
  skill_judge: z.boolean().optional(),
  /** True when `POST /v1/skilled-demonstrations` is served; absent (older servers) means false. */
  skilled_demonstration: z.boolean().optional(),
});

/** `POST /v1/tasks` body. */
export const TasksRequestSchema = z.object({
  split: SplitSchema,
  count: z.number().int().min(1).max(10_000),
  seed: uint32,
  options: z.record(z.string(), z.unknown()).optional(),
});

/**
 * `POST /v1/episodes`, `POST /v1/experts` and `POST /v1/skilled-demonstrations` body; a retry
 * repeats `request_id` (see the module doc).
 */
export const TaskRequestSchema = z.object({
  task: TaskSchema,
  request_id: z.string().min(1).max(100).optional(),
});

/** `POST /v1/episodes/{id}/step` body. */
export const StepRequestSchema = z.object({
  action: z.string().max(10_000),
  seq: z.number().int().min(0).optional(),
});

/** `POST /v1/experts/{id}/act` body. */
export const ActRequestSchema = z.object({
  observation: WireObservationSchema,
  seq: z.number().int().min(0).optional(),
});

/** `POST /v1/prompt` body. */
export const PromptRequestSchema = z.object({ input: PromptInputSchema });

/** `POST /v1/parse` body. */
export const ParseRequestSchema = z.object({ response: longText });

/** `POST /v1/analysis` body. */
export const AnalysisRequestSchema = z.object({ trajectory: TrajectorySchema });

/** `POST /v1/skill-judgement` body: a finished trajectory and a skill written for it. */
export const SkillJudgementRequestSchema = z.object({
  trajectory: TrajectorySchema,
  skill: z.string().max(20_000),
});

/** Answers the client reads. */
export const TasksResponseSchema = z.object({ tasks: z.array(TaskSchema) });
/** Answer of `POST /v1/episodes`. */
export const EpisodeCreatedSchema = z.object({
  episode_id: shortText,
  observation: WireObservationSchema,
});
/** Answer of `POST /v1/episodes/{id}/reset`. */
export const ObservationResponseSchema = z.object({ observation: WireObservationSchema });
/** Answer of `POST /v1/prompt`. */
export const PromptResponseSchema = z.object({ prompt: longText });
/** Answer of `POST /v1/parse`. */
export const ParseResponseSchema = z.object({ action: z.string().nullable() });
/** Answer of `POST /v1/experts`. */
export const ExpertCreatedSchema = z.object({ expert_id: shortText });
/**
 * Answer of `POST /v1/skilled-demonstrations`: the skill shown in every prompt of the
 * demonstration, and its expert (an id of `/v1/experts/{id}`).
 */
export const SkilledDemonstrationCreatedSchema = z.object({
  skill: z.string().max(20_000),
  expert_id: shortText,
});
/** Answer of `POST /v1/experts/{id}/act`. */
export const ActResponseSchema = z.object({ action: z.string() });
/** Answer of `POST /v1/analysis`. */
export const AnalysisResponseSchema = z.object({
  episode_summary: z.string(),
  episode_skill: z.string(),
  step_skills: z.record(z.string().regex(/^\d+$/), z.string()).optional(),
});
/**
 * Answer of `POST /v1/skill-judgement` (workers/envs/skill_judge.ts `SkillJudgement`):
 * `matches_reference` is optional, absent from servers older than it, whose `truthful` was the
 * reference match.
 */
export const SkillJudgementResponseSchema = z.object({
  well_formed: z.boolean(),
  truthful: z.boolean(),
  matches_reference: z.boolean().optional(),
});
/** Answer of `GET /v1/vocabulary`. */
export const VocabularyResponseSchema = z.object({ words: z.array(z.string()) });

/** An observation as JSON (image bytes → base64). */
export function observationToWire(o: Observation): z.infer<typeof WireObservationSchema> {
  const wire: z.infer<typeof WireObservationSchema> = { text: o.text };
  if (o.admissibleActions !== undefined) wire.admissibleActions = o.admissibleActions;
  if (o.image !== undefined) {
    let binary = "";
    for (let i = 0; i < o.image.rgb.length; i += 0x8000) {
      binary += String.fromCharCode(...o.image.rgb.subarray(i, i + 0x8000));
    }
    wire.image = { width: o.image.width, height: o.image.height, rgb_base64: btoa(binary) };
  }
  return wire;
}

/** An observation from JSON (base64 → image bytes). */
export function observationFromWire(w: z.infer<typeof WireObservationSchema>): Observation {
  const o: Observation = { text: w.text };
  if (w.admissibleActions !== undefined) o.admissibleActions = w.admissibleActions;
  if (w.image !== undefined) {
    const binary = atob(w.image.rgb_base64);
    const rgb = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) rgb[i] = binary.charCodeAt(i);
    o.image = { width: w.image.width, height: w.image.height, rgb };
  }
  return o;
}
