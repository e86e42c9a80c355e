import assert from "node:assert/strict";
import { Rng } from "../../../workers/model/sampling.ts";
import {
  buildByteLevelTokenizer,
  BUILTIN_SPECIAL_TOKENS,
  Tokenizer,
  TokenizerError,
} from "../../../workers/model/tokenizer.ts";

const TEXTS = [
  "You are an expert agent operating in the household environment.",
  "Your task is to: put a clean mug in the coffeemachine.",
  "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 2, a drawer 3, and a sinkbasin 1.",
  "go to countertop 2. take mug 1 from countertop 2. clean mug 1 with sinkbasin 1. Nothing happens.",
  "Your admissible actions of the current situation are: [inventory, look, examine].",
  "Now it's your turn to take an action. You should first reason step-by-step about the current situation.",
  "Prior to this step, you have already taken 3 step(s). [Observation : , Action : ]",
  "Sokoban grid: wall # box $ target . player @ push up down left right Schritt über café 東京",
];
const VOCABULARY = [
  ...new Set([
    ...TEXTS.flatMap((t) => t.match(/\p{L}+|\p{Nd}+/gu) ?? []),
    ...Array.from({ length: 101 }, (_, i) => String(i)),
  ]),
].sort();

const tokenizer = new Tokenizer(buildByteLevelTokenizer(VOCABULARY));

Deno.test("every vocabulary word is one token at the start of a text and after a space", () => {
  for (const word of VOCABULARY) {
    assert.equal(tokenizer.encode(word).length, 1, `"${word}"`);
    assert.equal(tokenizer.encode(" " + word).length, 1, `" ${word}"`);
  }
});

Deno.test("a typical sentence has one token per word and per punctuation mark", () => {
  const sentence = "Your task is to: put a clean mug in the coffeemachine.";
  const words = sentence.match(/\p{L}+|\p{Nd}+/gu)!.length;
  const marks = sentence.match(/[^\p{L}\p{N}\s]/gu)!.length;
  assert.equal(tokenizer.encode(sentence).length, words + marks);
  const listing = "[Observation : go to countertop 2 , Action : take mug 1]";
  assert.equal(
    tokenizer.encode(listing).length,
    listing.match(/\p{L}+|\p{Nd}+/gu)!.length + listing.match(/[^\p{L}\p{N}\s]/gu)!.length,
  );
});

Deno.test("decode(encode(x)) is x for random unicode text and unknown words", () => {
  const rng = new Rng(2024);
  const alphabet = [..."abcxyz ABC 019 .,:;!?'\"()[]{}<>#$@_-\n\t  éüß東京🙂𝔘\u0301\u200b"];
  for (let n = 0; n < 200; n++) {
    let text = "";
    const length = rng.nextInt(40);
    for (let i = 0; i < length; i++) {
      text += rng.next() < 0.3
        ? String.fromCodePoint(0x20 + rng.nextInt(0x2fff))
        : alphabet[rng.nextInt(alphabet.length)];
    }
    const back = tokenizer.decode(tokenizer.encode(text));
    assert.equal(back, text.toWellFormed(), JSON.stringify(text));
  }
  const unknown = "zyxwvut qwerty don't  spaces   and\ttabs\n\nnewlines 123456789";
  assert.equal(tokenizer.decode(tokenizer.encode(unknown)), unknown);
  assert.equal(tokenizer.decode([]), "");
});

Deno.test("special tokens are single ids, EOS doubles as pad, and skipSpecialTokens drops them", () => {
  const eos = tokenizer.eosTokenId!;
  assert.equal(tokenizer.idToToken(eos), "<|endoftext|>");
  assert.equal(tokenizer.padTokenId, eos);
  assert.equal(tokenizer.bosTokenId, null);
  assert.equal(tokenizer.vocabSize, eos + BUILTIN_SPECIAL_TOKENS.length);
  assert.deepEqual(tokenizer.stopTokenIds, [eos, tokenizer.tokenToId("<|im_end|>")]);
  const ids = tokenizer.encode("go north<|endoftext|>");
  assert.equal(ids.at(-1), eos);
  assert.equal(tokenizer.decode(ids), "go north<|endoftext|>");
  assert.equal(tokenizer.decode(ids, { skipSpecialTokens: true }), "go north");
  assert.equal(tokenizer.decode([...ids, tokenizer.vocabSize + 5]), "go north<|endoftext|>");
  assert.throws(() => tokenizer.decode([-1]), /must be a non-negative integer/);
});

Deno.test("the builtin chat template renders ChatML and tokenizes its markers as one token each", () => {
  const text = tokenizer.applyChatTemplate(
    [{ role: "system", content: "You are an expert agent." }, {
      role: "user",
      content: "go to countertop 2",
    }],
    { addGenerationPrompt: true },
  );
  assert.equal(
    text,
    "<|im_start|>system\nYou are an expert agent.<|im_end|>\n<|im_start|>user\ngo to countertop 2<|im_end|>\n<|im_start|>assistant\n",
  );
  const start = tokenizer.tokenToId("<|im_start|>")!;
  assert.equal(tokenizer.encode(text).filter((id) => id === start).length, 3);
});

Deno.test("the tokenizer files survive a JSON round trip and load the same", () => {
  const files = buildByteLevelTokenizer(VOCABULARY);
  const enc = new TextEncoder();
  const again = Tokenizer.fromBytes(
    enc.encode(JSON.stringify(files.tokenizerJson)),
    enc.encode(JSON.stringify(files.tokenizerConfig)),
  );
  const text = TEXTS.join("\n");
  assert.deepEqual(again.encode(text), tokenizer.encode(text));
  assert.deepEqual(buildByteLevelTokenizer(VOCABULARY), files); // deterministic
});

Deno.test("unsupported or malformed tokenizer files fail with clear errors", () => {
  assert.throws(
    () =>
      new Tokenizer({
        tokenizerJson: { model: { type: "WordLevel", vocab: {} } },
        tokenizerConfig: null,
      }),
    /model must be BPE, WordPiece or Unigram: current value is WordLevel/,
  );
  assert.throws(() => Tokenizer.fromBytes(new TextEncoder().encode("{"), null), TokenizerError);
  assert.throws(() => buildByteLevelTokenizer([]), /vocabulary must hold 1 to/);
  const plain = new Tokenizer({ ...buildByteLevelTokenizer(["a"]), tokenizerConfig: null });
  assert.throws(() => plain.applyChatTemplate([]), /must hold chat_template/);
});

Deno.test("a WordPiece tokenizer.json from the Hub format loads and encodes", () => {
  const vocab = { "[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "go": 3, "north": 4, "##th": 5, "nor": 6 };
  const t = new Tokenizer({
    tokenizerJson: {
      added_tokens: [],
      normalizer: {
        type: "BertNormalizer",
        lowercase: true,
        clean_text: true,
        handle_chinese_chars: true,
        strip_accents: null,
      },
      pre_tokenizer: { type: "BertPreTokenizer" },
      post_processor: null,
      decoder: { type: "WordPiece", prefix: "##", cleanup: true },
      model: {
        type: "WordPiece",
        unk_token: "[UNK]",
        continuing_subword_prefix: "##",
        max_input_chars_per_word: 100,
        vocab,
      },
    },
    tokenizerConfig: { unk_token: "[UNK]" },
  });
  assert.deepEqual(t.encode("Go north"), [3, 4]);
  assert.deepEqual(t.encode("go nor"), [3, 6]);
  assert.equal(t.vocabSize, 7);
});

Deno.test("minTokens bounds the token count from the text's length, through Unicode normalizers only", () => {
  const longest = Math.max(...VOCABULARY.map((w) => w.length + 1)); // "Ġword": a space and the word
  assert.equal(tokenizer.maxTokenChars, longest);
  for (const text of TEXTS) {
    const bound = tokenizer.minTokens(text)!;
    assert.equal(bound, Math.ceil(text.length / longest));
    assert.ok(tokenizer.encode(text).length >= bound);
  }
  const files = buildByteLevelTokenizer(VOCABULARY);
  const withNormalizer = (normalizer: unknown) =>
    new Tokenizer({ ...files, tokenizerJson: { ...files.tokenizerJson, normalizer } });
  // NFC composes e + U+0301 into é: the bound counts the composed text, as the tokenizer sees it
  const decomposed = "e\u0301".repeat(30);
  const nfc = withNormalizer({ type: "NFC" });
  assert.equal(nfc.minTokens(decomposed), Math.ceil(30 / longest));
  assert.ok(nfc.encode(decomposed).length >= nfc.minTokens(decomposed)!);
  const sequence = withNormalizer({ type: "Sequence", normalizers: [{ type: "NFKC" }] });
  assert.equal(sequence.minTokens("abc"), 1);
  // a normalizer that may delete text gives no bound
  assert.equal(withNormalizer({ type: "Lowercase" }).minTokens("abc"), null);
  assert.equal(
    withNormalizer({ type: "Sequence", normalizers: [{ type: "NFC" }, { type: "Strip" }] })
      .minTokens("abc"),
    null,
  );
});
