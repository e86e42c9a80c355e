import assert from "node:assert/strict";
import {
  buildTurnPrompt,
  parseActionText,
  PromptInputError,
  promptTemplateVocabulary,
  TASK_LINE_PREFIX,
  TURN_LINE_PREFIX,
  vocabularyOf,
} from "../../../workers/envs/prompt.ts";
import type { Task, TrajectoryStep } from "../../../workers/envs/types.ts";

const task: Task = {
  envId: "demo",
  id: "demo/train/0",
  split: "train",
  seed: 1,
  family: "demo",
  instruction: "reach the door",
  options: {},
};

function step(n: number): TrajectoryStep {
  return {
    observation: `room ${n}`,
    response: `<action>go ${n}</action>`,
    action: `go ${n}`,
    valid: true,
    reward: 0,
  };
}

Deno.test("the first-turn prompt has the system line, the task on its own line and the turn line", () => {
  const prompt = buildTurnPrompt({
    systemLine: "You are in a house.",
    task,
    history: [],
    observation: { text: "You see a door.", admissibleActions: ["open door", "look"] },
    historyLength: 2,
    turn: 1,
  });
  const lines = prompt.split("\n");
  assert.equal(lines[0], "You are in a house.");
  assert.equal(lines[1], `${TASK_LINE_PREFIX}reach the door`);
  assert.equal(lines[2], "You are now at step 1 and your current observation is: You see a door.");
  assert.equal(
    lines[3],
    "Your admissible actions of the current situation are: [open door, look].",
  );
  assert.ok(lines[4].startsWith(TURN_LINE_PREFIX));
  assert.match(lines[4], /<action>your action<\/action>/);
  assert.doesNotMatch(prompt, /Prior to this step/);
});

Deno.test("the history window shows only the most recent steps, numbered by episode step", () => {
  const prompt = buildTurnPrompt({
    systemLine: "S.",
    task,
    history: [step(1), step(2), step(3), step(4), step(5)],
    observation: { text: "now" },
    historyLength: 2,
    turn: 6,
    formatHint: "Actions look like go[n].",
  });
  const lines = prompt.split("\n");
  assert.equal(
    lines[2],
    "Prior to this step, you have already taken 5 step(s). Below are the most recent 2 " +
      "observations and the corresponding actions you took:",
  );
  assert.equal(lines[3], "[Observation 4: room 4, Action 4: go 4]");
  assert.equal(lines[4], "[Observation 5: room 5, Action 5: go 5]");
  assert.equal(lines[5], "You are now at step 6 and your current observation is: now");
  assert.ok(lines[6].startsWith(`${TURN_LINE_PREFIX} Actions look like go[n].`));
  assert.equal(lines.length, 7);
});

Deno.test("a history length of zero hides history and an unparsed action shows as (none)", () => {
  const base = { systemLine: "S.", task, observation: { text: "o" }, turn: 2 };
  const hidden = buildTurnPrompt({ ...base, history: [step(1)], historyLength: 0 });
  assert.doesNotMatch(hidden, /Prior to this step/);
  const none = buildTurnPrompt({
    ...base,
    history: [{ ...step(1), action: "", valid: false }],
    historyLength: 3,
  });
  assert.match(none, /\[Observation 1: room 1, Action 1: \(none\)\]/);
  assert.match(none, /the most recent 1 observations/);
});

Deno.test("malformed prompt inputs throw PromptInputError", () => {
  const base = { systemLine: "S.", task, history: [], observation: { text: "o" } };
  assert.throws(() => buildTurnPrompt({ ...base, historyLength: -1, turn: 1 }), PromptInputError);
  assert.throws(() => buildTurnPrompt({ ...base, historyLength: 1, turn: 0 }), PromptInputError);
  assert.throws(
    () => buildTurnPrompt({ ...base, systemLine: "a\nb", historyLength: 1, turn: 1 }),
    PromptInputError,
  );
});

Deno.test("parseActionText takes the last action tag, case-insensitively, collapsing spaces", () => {
  assert.equal(parseActionText("<think>left?</think><action>Up</action>"), "up");
  assert.equal(
    parseActionText("<action>left</action> no, <ACTION>  Move\n Down </Action>"),
    "move down",
  );
  assert.equal(
    parseActionText("<action>Go To Desk 1</action>", { lowercase: false }),
    "Go To Desk 1",
  );
  assert.equal(parseActionText("< action >right</ action >"), "right");
});

Deno.test("parseActionText tolerates a missing closing tag", () => {
  assert.equal(parseActionText("<think>plan</think><action> right "), "right");
  assert.equal(parseActionText("<action>click[< prev]</action>"), "click[< prev]");
});

Deno.test("parseActionText accepts an untagged single short line and refuses prose", () => {
  assert.equal(parseActionText("  LEFT \n"), "left");
  assert.equal(parseActionText("<think>hmm</think> down"), "down");
  assert.equal(parseActionText("first line\nsecond line"), null);
  assert.equal(parseActionText("x".repeat(101)), null);
  assert.equal(parseActionText("<think>unfinished thought"), null);
  assert.equal(parseActionText("<action></action>"), null);
  assert.equal(parseActionText("   "), null);
  assert.equal(parseActionText(""), null);
});

Deno.test("vocabularyOf splits into letter runs and digit runs, sorted and unique", () => {
  assert.deepEqual(vocabularyOf(["it's step 12.", "Step 12: √X_O#"]), [
    "12",
    "O",
    "Step",
    "X",
    "it",
    "s",
    "step",
  ]);
});

Deno.test("the template vocabulary covers every word of a built prompt", () => {
  const prompt = buildTurnPrompt({
    systemLine: "",
    task: { ...task, instruction: "" },
    history: [step(1), { ...step(2), action: "" }],
    observation: { text: "", admissibleActions: ["x"] },
    historyLength: 2,
    turn: 3,
  });
  const vocab = new Set(promptTemplateVocabulary(10));
  const envWords = new Set(["room", "go", "x"]);
  for (const w of vocabularyOf([prompt])) {
    assert.ok(vocab.has(w) || envWords.has(w), `word ${w} missing`);
  }
});

Deno.test("the turn number sets the step numbers, so a caller may pass only the latest steps", () => {
  const prompt = buildTurnPrompt({
    systemLine: "S.",
    task,
    history: [step(8), step(9)],
    observation: { text: "grid\nrow" },
    historyLength: 2,
    turn: 10,
  });
  assert.match(prompt, /already taken 9 step\(s\)/);
  assert.match(prompt, /\[Observation 8: room 8, Action 8: go 8\]/);
  assert.match(prompt, /your current observation is:\ngrid\nrow\n/);
  assert.throws(
    () =>
      buildTurnPrompt({
        ...{ systemLine: "S.", task, observation: { text: "o" } },
        history: [step(1), step(2)],
        historyLength: 2,
        turn: 2,
      }),
    PromptInputError,
  );
});
