/**
 * Request → prompt text → token ids, and skills at inference.
 *
 * Chat messages become a prompt in the checkpoint's own form ({@link ServedModel.promptForm}),
 * rendered and encoded by the implementation the trainer uses (workers/model/chat_template.ts):
 *
 * - `chat_template`: the tokenizer's Jinja chat template with the generation prompt
 *   (`developer` messages are passed as `system`; Qwen3's `enable_thinking` false), encoded
 *   without adding special tokens (the template writes them), as `transformers`'
 *   `apply_chat_template` does;
 * - `plain` (builtin models): the message texts joined by newlines, then `PROMPT_SUFFIX`.
 *
 * Either way one user message holding an environment's turn prompt is exactly the prompt the
 * policy was trained and evaluated on (workers/seed/text_policy.ts).
 *
 * A completions `prompt` is encoded as it is (with the tokenizer's special tokens, e.g. a BOS).
 *
 * Skills (`skills` extension field): the chosen skill (skill_choice.ts) is inserted as re-scoring
 * inserts it into a turn's prompt (workers/seed/skills.ts `insertSkill`): right after the
 * `Your task is to:` line, into the first message that has one (for chat models the block thus
 * stays inside that message, never a message of its own), else into the last user message.
 */
import { TASK_LINE_PREFIX } from "../envs/prompt.ts";
import { type ChatMessage, encodePrompt as encodeRendered, renderPrompt } from "../model/mod.ts";
import { insertSkill } from "../seed/skills.ts";
import type { ServedModel } from "./models.ts";
import { type ChatRequestMessage, messageText } from "./schemas.ts";

/** A chat request's messages as plain role/content pairs. */
export function chatMessages(messages: readonly ChatRequestMessage[]): ChatMessage[] {
  return messages.map((m) => ({
    role: m.role === "developer" ? "system" : m.role,
    content: messageText(m),
  }));
}

/** The prompt text of chat messages in the model's prompt form (see module doc). */
export function renderChat(
  model: Pick<ServedModel, "promptForm" | "tokenizer">,
  messages: readonly ChatMessage[],
): string {
  return renderPrompt(model.tokenizer, model.promptForm, messages);
}

/** Token ids of a rendered prompt (see module doc for when special tokens are added). */
export function encodePrompt(
  model: Pick<ServedModel, "promptForm" | "tokenizer">,
  text: string,
  kind: "chat" | "completion",
): number[] {
  return encodeRendered(model.tokenizer, kind === "chat" ? model.promptForm : "plain", text);
}

/** The task of a prompt: the rest of its first `Your task is to:` line, or null. */
export function taskOf(text: string): string | null {
  const line = text.split("\n").find((l) => l.includes(TASK_LINE_PREFIX.trim()));
  if (line === undefined) return null;
  return line.slice(line.indexOf(TASK_LINE_PREFIX.trim()) + TASK_LINE_PREFIX.trim().length)
    .trim();
}

/** The index of the message a skill goes into (see module doc); -1 when there is none. */
export function skillMessageIndex(messages: readonly ChatMessage[]): number {
  const withTask = messages.findIndex((m) => taskOf(m.content) !== null);
  if (withTask >= 0) return withTask;
  return messages.findLastIndex((m) => m.role === "user");
}

/** `messages` with `skill` inserted into message {@link skillMessageIndex}. */
export function withSkill(messages: readonly ChatMessage[], skill: string): ChatMessage[] {
  const at = skillMessageIndex(messages);
  return messages.map((m, i) => (i === at ? { ...m, content: insertSkill(m.content, skill) } : m));
}
