/**
 * Request bodies of the inference server (OpenAI's chat-completions and completions shapes), as
 * zod schemas: validated once where they enter, with bounded sizes. Fields OpenAI defines that
 * this server does not implement are refused with a 400 naming them when set to anything but
 * their no-op value (`tools`, a non-zero penalty, `echo`, …), never silently ignored; unknown
 * fields are refused too, as OpenAI does.
 *
 * Log-probs as OpenAI takes them: chat `logprobs: true` with `top_logprobs` 0–20; completions
 * `logprobs` 0–20 (the number of alternatives; OpenAI allows up to 5, vLLM more).
 *
 * Extensions: `skills` (`"library"` or `{"step": N}`) asks for the job's best skill for the
 * prompt's task to be put into the prompt (see workers/skills/choice.ts);
 * `return_tokens_as_token_ids` (vLLM's) writes each log-prob token as `token_id:<id>`;
 * `sampling_stream` (`{"seed": s, "row": i}`) draws choice j from the trainer's stream of row i + j
 * of a batch generated with seed s (workers/model/sampling.ts `choiceRng`), in place of `seed`: a
 * remote rollout then samples what the local decode would (workers/seed/remote_rollout.ts).
 */
import { z } from "zod";
import { MAX_PROMPT_IDS } from "./token_ids.ts";

/** Longest prompt or message text accepted (characters). */
export const MAX_TEXT_CHARS = 200_000;
/** Most messages in a chat request. */
export const MAX_MESSAGES = 256;
/** Most choices (`n`) per request. */
export const MAX_CHOICES = 16;
/** Most alternatives per token (`top_logprobs`, completions' `logprobs`), as OpenAI's chat. */
export const MAX_TOP_LOGPROBS = 20;

const text = z.string().max(MAX_TEXT_CHARS);

/** A content part: only text parts are supported. */
const contentPart = z.object({ type: z.literal("text"), text }).strict();

/** One chat message (`tool` messages and images are not supported). */
const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant"]),
  content: z.union([text, z.array(contentPart).max(64)]),
  name: z.string().max(64).optional(),
}).strict();

const stop = z.union([z.string().min(1).max(200), z.array(z.string().min(1).max(200)).max(4)])
  .nullable().optional();

/** `skills`: the job's latest skill library, or its library at a step. */
export const SkillsOptionSchema = z.union([
  z.literal("library"),
  z.object({ step: z.number().int().min(0) }).strict(),
]);

/** Value of the `skills` extension field. */
export type SkillsOption = z.infer<typeof SkillsOptionSchema>;

/** A field accepted only at its no-op value (e.g. `presence_penalty: 0`). */
const noop = <T extends z.ZodType>(schema: T, what: string) =>
  schema.optional().nullable().refine((v) => v === undefined || v === null || isNoop(v), {
    message: `is not supported by this server (${what})`,
  });

function isNoop(v: unknown): boolean {
  return v === false || v === 0 || v === "none" || (Array.isArray(v) && v.length === 0) ||
    (typeof v === "object" && v !== null && Object.keys(v).length === 0) ||
    (typeof v === "object" && (v as { type?: unknown }).type === "text");
}

/** Sampling fields shared by both endpoints. */
const sampling = {
  model: z.string().min(1).max(200),
  max_tokens: z.number().int().min(1).max(1_000_000).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  n: z.number().int().min(1).max(MAX_CHOICES).nullable().optional(),
  stop,
  seed: z.number().int().min(-(2 ** 53)).max(2 ** 53).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).strict().nullable()
    .optional(),
  user: z.string().max(256).optional(),
  presence_penalty: noop(z.number(), "penalties"),
  frequency_penalty: noop(z.number(), "penalties"),
  logit_bias: noop(z.record(z.string(), z.number()), "logit_bias"),
  skills: SkillsOptionSchema.optional(),
  return_tokens_as_token_ids: z.boolean().nullable().optional(),
  sampling_stream: z.object({
    seed: z.number().int().min(0).max(2 ** 32 - 1),
    row: z.number().int().min(0).max(2 ** 31 - 1),
  }).strict().nullable().optional(),
};

/** `POST /v1/chat/completions`. */
export const ChatRequestSchema = z.object({
  ...sampling,
  messages: z.array(message).min(1).max(MAX_MESSAGES),
  max_completion_tokens: z.number().int().min(1).max(1_000_000).nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullable().optional(),
  tools: noop(z.array(z.unknown()), "tools"),
  tool_choice: noop(z.unknown(), "tools"),
  response_format: noop(z.unknown(), "only text responses"),
  parallel_tool_calls: z.boolean().optional(),
}).strict().refine((r) => r.top_logprobs == null || r.logprobs === true, {
  message: "top_logprobs requires logprobs: true",
  path: ["top_logprobs"],
});

/** A prompt as token ids (token_ids.ts): never re-tokenized. */
const promptIds = z.array(z.number().int().min(0).max(2 ** 31 - 1)).min(1).max(MAX_PROMPT_IDS);

/**
 * `POST /v1/completions`: one prompt string, or an array of exactly one; or token ids (a list, or
 * a list of exactly one list), as vLLM takes them (token_ids.ts).
 */
export const CompletionRequestSchema = z.object({
  ...sampling,
  prompt: z.union([text, z.array(text).length(1), promptIds, z.array(promptIds).length(1)]),
  logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullable().optional(),
  echo: noop(z.boolean(), "echo"),
  best_of: z.number().int().min(1).max(1).nullable().optional(),
  suffix: noop(z.string(), "suffix"),
}).strict();

/** A parsed chat request. */
export type ChatRequest = z.infer<typeof ChatRequestSchema>;
/** A parsed completions request. */
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;
/** One chat message as parsed. */
export type ChatRequestMessage = ChatRequest["messages"][number];

/** The text of a message's content (text parts joined without separator, as OpenAI does). */
export function messageText(m: ChatRequestMessage): string {
  return typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("");
}
