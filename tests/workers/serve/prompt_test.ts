/**
 * The pieces between a request and the decode engine: prompt forms (plain for builtin models, the
 * checkpoint's own chat template otherwise), skill choice and insertion, and the streamed text of
 * a choice (stop strings cut, nothing shown that a later token could take back).
 */
import assert from "node:assert/strict";
import {
  buildByteLevelTokenizer,
  createBuiltinTiny,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import {
  chooseSkill,
  skillBlock,
  SkillLibrary,
  taskOf,
  withSkill,
} from "../../../workers/skills/mod.ts";
import { encodePrompt, renderChat } from "../../../workers/serve/prompt.ts";
import { ChoiceText } from "../../../workers/serve/text.ts";
import { gpt2Tokenizer } from "../model/_gpt2.ts";
import { qwen3Tokenizer } from "../model/_qwen3.ts";

const words = ["push", "the", "box", "onto", "target", "Your", "task", "is", "to:", "up"];

Deno.test("builtin models read messages in the trainer's plain prompt form", () => {
  const tiny = createBuiltinTiny({ vocabulary: words, seed: 1 });
  const tokenizer = new Tokenizer(tiny.tokenizer);
  const model = { promptForm: "plain" as const, tokenizer };
  const text = renderChat(model, [
    { role: "system", content: "Sokoban." },
    { role: "user", content: "Your task is to: push the box" },
  ]);
  assert.equal(text, "Sokoban.\nYour task is to: push the box\n");
  assert.deepEqual(encodePrompt(model, text, "chat"), tokenizer.encode(text));
});

Deno.test("a checkpoint with its own chat template gets its messages rendered by it", () => {
  const files = buildByteLevelTokenizer(words);
  files.tokenizerConfig = {
    ...files.tokenizerConfig,
    chat_template:
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
  };
  const tokenizer = new Tokenizer(files);
  const model = { promptForm: "chat_template" as const, tokenizer };
  const messages = withSkill([
    { role: "system", content: "Be brief." },
    { role: "user", content: "Your task is to: push the box\nNow act." },
  ], "push up");
  const text = renderChat(model, messages);
  assert.equal(
    text,
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nYour task is to: push the box\n\n" +
      `${skillBlock("push up")}\n\nNow act.<|im_end|>\n<|im_start|>assistant\n`,
  );
  const ids = encodePrompt(model, text, "chat");
  assert.equal(ids.filter((t) => t === tokenizer.tokenToId("<|im_start|>")).length, 3);
});

Deno.test("a Qwen3 checkpoint is served in the chat form it was trained in (non-thinking)", () => {
  const tokenizer = qwen3Tokenizer();
  const model = { promptForm: "chat_template" as const, tokenizer };
  const messages = withSkill([{ role: "user", content: "Your task is to: push\nAct." }], "go up");
  const text = renderChat(model, messages);
  assert.equal(
    text,
    `<|im_start|>user\nYour task is to: push\n\n${skillBlock("go up")}\n\nAct.<|im_end|>\n` +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  const ids = encodePrompt(model, text, "chat");
  assert.equal(ids[0], 151644, "no BOS added before <|im_start|>");
  assert.deepEqual(ids.slice(-4), [151667, 271, 151668, 271]);
});

Deno.test("the best skill matches the task's words, then success share and sightings", () => {
  const lib = new SkillLibrary("j");
  const add = (text: string, won: number, lost: number, summary = "") => {
    for (let i = 0; i < won + lost; i++) {
      lib.add(text, {
        step: 1,
        taskId: "t",
        trajectoryId: `${text}-${i}`,
        success: i < won,
        meanTeacherGap: null,
      }, summary);
    }
  };
  add("walk around walls first", 5, 0);
  add("never push into a corner", 0, 3, "lost the box in a corner");
  add("go up then push right", 1, 1, "pushed the box onto the target");
  assert.equal(
    taskOf("intro\nYour task is to: push the box onto the target\nrest"),
    "push the box onto the target",
  );
  const best = chooseSkill(lib, "push the box onto the target");
  assert.equal(best?.record.text, "go up then push right");
  assert.equal(best?.relevance, 1);
  assert.equal(chooseSkill(lib, null)?.record.text, "walk around walls first");
  assert.equal(chooseSkill(new SkillLibrary("j"), "x"), null);
});

Deno.test("streamed text holds back a possible stop string and cuts at the stop", () => {
  const pieces = ["Hel", "lo <", "/ac", "tion> tail"];
  const t = new ChoiceText((ids) => ids.map((i) => pieces[i]).join(""), ["</action>"]);
  assert.deepEqual(t.push(0), { delta: "Hel", stopped: false });
  assert.deepEqual(t.push(1), { delta: "lo ", stopped: false }, "'<' may start the stop string");
  assert.deepEqual(t.push(2), { delta: "", stopped: false });
  assert.deepEqual(t.push(3), { delta: "", stopped: true });
  assert.equal(t.text, "Hello ");
  const u = new ChoiceText((ids) => ids.map((i) => ["a<", "\uFFFD", "é"][i]).join(""), ["<x"]);
  assert.equal(u.push(0).delta, "a");
  assert.equal(u.push(1).delta, "", "a replacement character waits for the rest of its bytes");
  assert.equal(u.finish(), "<\uFFFD", "at the end, what is left is shown as it is");
});

Deno.test("streamed text decoded a window at a time equals the whole decode on real tokenizers", () => {
  const tiny = new Tokenizer(createBuiltinTiny({ vocabulary: words, seed: 1 }).tokenizer);
  let state = 12345;
  const random = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0; // LCG: a fixed, seeded sequence
    return state % n;
  };
  const sample = "Your task: pousser la boîte — 箱を押す 😀 </action> up\nright ";
  for (const tok of [tiny, gpt2Tokenizer(), qwen3Tokenizer()]) {
    const decode = (ids: number[]) => tok.decode(ids, { skipSpecialTokens: true });
    const real = tok.encode(sample);
    for (let trial = 0; trial < 20; trial++) {
      // runs of real text (multi-byte characters split over tokens) between random ids (bytes
      // that never form a character, special tokens)
      const ids: number[] = [];
      while (ids.length < 120) {
        if (random(3) === 0) ids.push(random(tok.vocabSize));
        else ids.push(...real.slice(random(real.length)).slice(0, 1 + random(12)));
      }
      const stops = trial % 2 === 0 ? [] : ["</action>"];
      const t = new ChoiceText(decode, stops);
      let shown = "", pushed = 0, stopped = false;
      for (const id of ids) {
        const step = t.push(id);
        pushed++;
        shown += step.delta;
        if ((stopped = step.stopped)) break;
      }
      shown += t.finish();
      const whole = decode(ids.slice(0, pushed));
      const expected = stopped ? whole.slice(0, whole.indexOf("</action>")) : whole;
      assert.equal(t.text, expected, `trial ${trial}`);
      assert.equal(shown, expected, `trial ${trial}: the deltas add up to the text`);
      assert.equal(stopped, stops.length > 0 && whole.includes("</action>"));
    }
  }
});
