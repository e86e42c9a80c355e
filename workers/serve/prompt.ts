/**
 * Request → prompt text → token ids.
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
 * Skills (`skills` extension field): the chosen skill goes into the messages as re-scoring puts it
 * into a turn's prompt (workers/skills, `withSkill`).
 */
import { type ChatMessage, encodePrompt as encodeRendered, renderPrompt } from "../model/mod.ts";
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
