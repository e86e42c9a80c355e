/**
 * Prompt forms: how a message list becomes the text and token ids a model reads, and how an
 * assistant turn ends. One implementation for training (workers/seed/text_policy.ts) and serving
 * (workers/serve/prompt.ts), so a checkpoint is served in the form it was trained on.
 *
 * - `chat_template`: the tokenizer's own Jinja chat template (`tokenizer_config.json`
 *   `chat_template`), rendered with the generation prompt as `transformers`'
 *   `apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False)` does, and
 *   encoded without adding special tokens (the template writes them: adding a BOS again would
 *   double it). `enable_thinking=False` is Qwen3's switch for its non-thinking mode (the
 *   generation prompt then holds an empty `<think>\n\n</think>\n\n` block); templates that do not
 *   read the variable ignore it. An assistant turn ends with the template's end-of-turn token
 *   ({@link endOfTurnTokenId}, e.g. `<|im_end|>` for Qwen, `<|eot_id|>` for Llama 3).
 * - `plain` (builtin models and tokenizers without a template of their own): the message texts
 *   joined by newlines, then {@link PROMPT_SUFFIX}, encoded with the tokenizer's special tokens.
 *   Builtin tokenizers carry a generic ChatML template ({@link BUILTIN_CHAT_TEMPLATE}), but
 *   builtin models are trained from scratch on exactly this plain form.
 */
import { BUILTIN_CHAT_TEMPLATE, type ChatMessage, type Tokenizer } from "./tokenizer.ts";

/** How chat messages become a prompt (see module doc). */
export type PromptForm = "chat_template" | "plain";

/** Separator between a plain prompt and its response. */
export const PROMPT_SUFFIX = "\n";

/**
 * `chat_template` when the tokenizer has a chat template of its own (not the builtin ChatML one);
 * `plain` otherwise.
 */
export function promptFormOf(tokenizer: Tokenizer): PromptForm {
  const own = tokenizer.chatTemplate !== null && tokenizer.chatTemplate !== BUILTIN_CHAT_TEMPLATE;
  return own ? "chat_template" : "plain";
}

/**
 * The prompt text of `messages` in `form`, ending where the assistant's answer starts.
 * @throws {TokenizerError} when the chat template fails to render.
 */
export function renderPrompt(
  tokenizer: Tokenizer,
  form: PromptForm,
  messages: readonly ChatMessage[],
): string {
  if (form === "chat_template") {
    return tokenizer.applyChatTemplate([...messages], {
      addGenerationPrompt: true,
      enableThinking: false,
    });
  }
  return messages.map((m) => m.content).join("\n") + PROMPT_SUFFIX;
}

/**
 * Token ids of a rendered prompt: a chat-template text is encoded without adding special tokens
 * (the template wrote them), a plain one with them (e.g. a BOS).
 */
export function encodePrompt(tokenizer: Tokenizer, form: PromptForm, text: string): number[] {
  return tokenizer.encode(text, { addSpecialTokens: form !== "chat_template" });
}

/** Content the end-of-turn probe renders as an assistant message; never a token's text. */
const PROBE = "\u2063seed-end-of-turn-probe\u2063";

/**
 * The id of the token that ends an assistant turn under the tokenizer's chat template: the
 * special (added) token the template writes right after an assistant message's content (found by
 * rendering a user and an assistant message), else `tokenizer_config.json`'s `eos_token` (also
 * when there is no template or it refuses that conversation), else null.
 */
export function endOfTurnTokenId(tokenizer: Tokenizer): number | null {
  if (endOfTurn.has(tokenizer)) return endOfTurn.get(tokenizer)!;
  const id = findEndOfTurn(tokenizer);
  endOfTurn.set(tokenizer, id);
  return id;
}

/** {@link endOfTurnTokenId} per tokenizer (rendering the probe once). */
const endOfTurn = new WeakMap<Tokenizer, number | null>();

function findEndOfTurn(tokenizer: Tokenizer): number | null {
  if (tokenizer.chatTemplate === null) return tokenizer.eosTokenId;
  let text: string;
  try {
    text = tokenizer.applyChatTemplate([
      { role: "user", content: "Hi" },
      { role: "assistant", content: PROBE },
    ], { enableThinking: false });
  } catch {
    return tokenizer.eosTokenId; // a template that refuses this conversation: fall back to EOS
  }
  const at = text.lastIndexOf(PROBE);
  if (at >= 0) {
    const after = text.slice(at + PROBE.length);
    const ids = tokenizer.encode(after, { addSpecialTokens: false });
    if (ids.length > 0 && tokenizer.isSpecialToken(ids[0])) return ids[0];
  }
  return tokenizer.eosTokenId;
}

/**
 * The token ids that end a generation in `form`: the tokenizer's stop tokens (EOS and the usual
 * chat markers, `Tokenizer.stopTokenIds`), the model's declared EOS ids (`declared`, from
 * {@link declaredEosTokenIds}: every id of `generation_config.json`'s `eos_token_id` list, as
 * transformers' `generate` and vLLM stop on each), plus, for `chat_template`, the template's
 * end-of-turn token. Ids outside the vocabulary are left out.
 */
export function stopTokenIdsOf(
  tokenizer: Tokenizer,
  form: PromptForm,
  declared: readonly number[] = [],
): number[] {
  const ids = [...tokenizer.stopTokenIds];
  const end = form === "chat_template" ? endOfTurnTokenId(tokenizer) : null;
  for (const id of [...declared, ...(end === null ? [] : [end])]) {
    if (id >= 0 && id < tokenizer.vocabSize && !ids.includes(id)) ids.push(id);
  }
  return ids;
}

/**
 * The EOS token ids a model's files declare, as transformers' `GenerationConfig` reads them:
 * `generation_config.json`'s `eos_token_id` (one id or a list, e.g. Qwen3's
 * `[151645, 151643]`, Llama 3.1's `[128001, 128008, 128009]`), else `config.json`'s (which
 * `DecoderConfig.eos_token_id` cuts to its first id), else the config's one id; [] when none.
 * Entries that are not non-negative integers are ignored.
 */
export function declaredEosTokenIds(model: {
  config: { eos_token_id: number | null };
  generationConfig: Record<string, unknown> | null;
  sourceConfig?: Record<string, unknown> | null;
}): number[] {
  const ids = (v: unknown): number[] | null => {
    const list = Array.isArray(v) ? v : v === undefined || v === null ? null : [v];
    return list && list.filter((x): x is number => Number.isInteger(x) && x >= 0);
  };
  return ids(model.generationConfig?.eos_token_id) ??
    ids(model.sourceConfig?.eos_token_id) ??
    ids(model.config.eos_token_id) ?? [];
}
