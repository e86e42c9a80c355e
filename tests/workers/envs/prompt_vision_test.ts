import assert from "node:assert/strict";
import {
  buildTurnPrompt,
  IMAGE_PLACEHOLDER,
  withImagePlaceholder,
} from "../../../workers/envs/mod.ts";
import type { Task, TrajectoryStep } from "../../../workers/envs/types.ts";

const task: Task = {
  envId: "demo",
  id: "demo/train/0",
  split: "train",
  seed: 1,
  family: "demo",
  instruction: "make 12",
  options: {},
};
const image = { width: 1, height: 1, rgb: new Uint8Array(3) };

function step(n: number): TrajectoryStep {
  return {
    observation: `Cards: ${n} of hearts.\nCurrent formula: ${n}`,
    response: `<action>+</action>`,
    action: "+",
    valid: true,
    reward: 0,
  };
}

const formulaLine = (text: string) => text.split("\n").slice(1).join("\n");

Deno.test("a vision prompt shows the placeholder once, in place of the part the image carries", () => {
  const prompt = buildTurnPrompt({
    systemLine: "You play cards.",
    task,
    history: [step(1), step(2)],
    observation: { text: "Cards: 3 of hearts.\nCurrent formula: 3 +", image },
    historyLength: 2,
    turn: 3,
    keptText: formulaLine,
  });
  assert.equal(prompt.split(IMAGE_PLACEHOLDER).length, 2);
  assert.ok(!prompt.includes("Cards:"), prompt);
  assert.match(prompt, /current observation is:\n<image>\nCurrent formula: 3 \+\n/);
  assert.match(prompt, /\[Observation 1: Current formula: 1, Action 1: \+\]/);
  assert.match(prompt, /\[Observation 2: Current formula: 2, Action 2: \+\]/);
});

Deno.test("history entries whose image carried everything show only the action", () => {
  const grid = { ...step(1), observation: "# # #\n# P #\n# # #", action: "up" };
  const prompt = buildTurnPrompt({
    systemLine: "You play Sokoban.",
    task,
    history: [grid, { ...grid, action: "" }],
    observation: { text: "# # #\n# P #\n# # #", image },
    historyLength: 5,
    turn: 3,
    keptText: () => "",
  });
  assert.ok(!prompt.includes("# P #"), prompt);
  assert.match(prompt, /\n\[Action 1: up\]\n\[Action 2: \(none\)\]\n/);
  assert.match(prompt, /current observation is: <image>\n/);
});

Deno.test("an observation without an image shows its text even where keptText is set", () => {
  const prompt = buildTurnPrompt({
    systemLine: "x",
    task,
    history: [],
    observation: { text: "Cards: 3 of hearts.\nCurrent formula: (empty)" },
    historyLength: 0,
    turn: 1,
    keptText: formulaLine,
  });
  assert.ok(!prompt.includes(IMAGE_PLACEHOLDER));
  assert.match(prompt, /Cards: 3 of hearts\./);
});

Deno.test("withImagePlaceholder adds <image> as one entry and keeps the list sorted and unique", () => {
  assert.deepEqual(withImagePlaceholder(["up", "image", "down"]), [
    "<image>",
    "down",
    "image",
    "up",
  ]);
});
