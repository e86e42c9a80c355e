import assert from "node:assert/strict";
import {
  analysisSchema,
  analysisTarget,
  buildAnalyzerPrompt,
  insertSkill,
  insertStepSkill,
  parseSkillAnalysis,
  stepSkillsByTrajectory,
  teacherPrompts,
} from "../../../workers/skills/mod.ts";
import type { Task, Trajectory } from "../../../workers/envs/types.ts";
import { SeedOptionError, SkillError } from "../../../workers/seed/errors.ts";
import {
  buildByteLevelTokenizer,
  JsonConstrainedDecoder,
  JsonObjectAutomaton,
  Rng,
  sampleToken,
  STATE_FIELDS,
  tokenBytes,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import {
  analyzerTemplateVocabulary,
  builtinVocabulary,
} from "../../../workers/seed/run/model_source.ts";
import { gpt2Tokenizer } from "../model/_gpt2.ts";
import {
  SOKOBAN_SKILL_GRAMMAR,
  SOKOBAN_SKILL_PATTERNS,
} from "../../../workers/envs/sokoban/judge.ts";
import { matchesSkillGrammar } from "../../../workers/envs/skill_judge.ts";
import {
  HOUSEHOLD_SKILL_GRAMMAR,
  householdSkillPatterns,
} from "../../../workers/envs/household/judge.ts";
import { getEnvironment } from "../../../workers/envs/registry.ts";
import { toAsyncEnvironment } from "../../../workers/envs/async.ts";
import { DEMO_PRESETS } from "../../../jobs/presets.ts";
import { parseJobSpec } from "../../../jobs/spec.ts";

const task: Task = {
  envId: "sokoban",
  id: "sokoban/train/3",
  split: "train",
  seed: 3,
  family: "sokoban",
  instruction: "push every box onto a goal",
  options: {},
};

function trajectory(won: boolean, n: number): Trajectory {
  return {
    task,
    won,
    score: won ? 10 : 0,
    steps: Array.from({ length: n }, (_, k) => ({
      observation: `grid ${k + 1}`,
      response: `<action>move ${k % 2 === 0 ? "up" : "left"}</action>`,
      action: k % 2 === 0 ? "up" : "left",
      valid: k !== 1,
      reward: 0,
    })),
  };
}

Deno.test("the analyzer prompt for a success asks for the workflow and lists every step", () => {
  const prompt = buildAnalyzerPrompt(trajectory(true, 3));
  const lines = prompt.split("\n");
  assert.ok(lines[0].includes("Return ONLY JSON"));
  assert.ok(prompt.includes('"episode_summary"') && prompt.includes('"episode_skill"'));
  assert.ok(prompt.includes("workflow, the core decision rule and action order that worked"));
  assert.ok(!prompt.includes("avoidance rule"));
  assert.ok(lines.includes("Your task is to: push every box onto a goal"));
  assert.ok(lines.includes("Outcome: success"));
  const stepAt = lines.indexOf("Step 2");
  assert.deepEqual(lines.slice(stepAt, stepAt + 4), [
    "Step 2",
    "Observation: grid 2",
    "Response: <action>move left</action>",
    "Action valid: no",
  ]);
  assert.equal(lines.filter((l) => /^Step \d+$/.test(l)).length, 3);
  assert.equal(lines.at(-1), "Action valid: yes");
});

Deno.test("the analyzer prompt for a failure asks for the avoidance rule", () => {
  const prompt = buildAnalyzerPrompt(trajectory(false, 1));
  assert.ok(prompt.includes("Outcome: failure"));
  assert.ok(prompt.includes("avoidance rule, the core mistake and the warning signs"));
  assert.ok(!prompt.includes("Outcome: success"));
  assert.ok(
    prompt.endsWith(
      "Step 1\nObservation: grid 1\nResponse: <action>move up</action>\nAction valid: yes",
    ),
  );
});

Deno.test("the analyzer prompt keeps the last steps and says how many were omitted", () => {
  const prompt = buildAnalyzerPrompt(trajectory(false, 5), { maxSteps: 2 });
  assert.ok(prompt.includes("(3 earlier steps omitted)"));
  assert.ok(!prompt.includes("Step 3\n") && !prompt.includes("grid 3"));
  assert.ok(prompt.includes("Step 4\nObservation: grid 4") && prompt.includes("Step 5\n"));
  const one = buildAnalyzerPrompt(trajectory(false, 3), { maxSteps: 2 });
  assert.ok(one.includes("(1 earlier step omitted)"));
  const all = buildAnalyzerPrompt(trajectory(false, 2), { maxSteps: 5 });
  assert.ok(!all.includes("omitted"));
});

Deno.test("the analyzer prompt shows the environment's feedback as Effect lines, earlier ones merged", () => {
  const effects = [
    "walked left",
    "walked left",
    undefined,
    "walked left",
    "pushed the box up",
    "walked up",
  ];
  const t = trajectory(true, effects.length);
  t.steps.forEach((step, k) => {
    if (effects[k] !== undefined) step.feedback = effects[k];
  });
  const lines = buildAnalyzerPrompt(t, { maxSteps: 2 }).split("\n");
  const omitted = lines.indexOf("(4 earlier steps omitted)");
  // Step 3 gave no feedback (an invalid action): the runs around it merge.
  assert.equal(lines[omitted + 1], "Earlier effects: walked left, 3 times");
  assert.deepEqual(lines.slice(omitted + 2), [
    "Step 5",
    "Observation: grid 5",
    "Response: <action>move up</action>",
    "Action valid: yes",
    "Effect: pushed the box up",
    "Step 6",
    "Observation: grid 6",
    "Response: <action>move left</action>",
    "Action valid: yes",
    "Effect: walked up",
  ]);
  const ends = buildAnalyzerPrompt(t, { maxSteps: 4 }).split("\n");
  assert.ok(ends.includes("Earlier effects: walked left, 2 times"));
  // Without feedback, no Effect or Earlier effects line: the reference's prompt.
  const plain = buildAnalyzerPrompt(trajectory(true, 6), { maxSteps: 2 });
  assert.ok(!plain.includes("Effect"));
});

Deno.test("blank feedback leaves no Effect line and multi-line feedback stays on one line", () => {
  const effects = ["  ", "walked left", "walked\nleft", "", "pushed the box\r\n  up\t", " \n "];
  const t = trajectory(true, effects.length);
  t.steps.forEach((step, k) => step.feedback = effects[k]);
  const lines = buildAnalyzerPrompt(t, { maxSteps: 3 }).split("\n");
  // blank feedback is no feedback: the two "walked left" merge across the blank step
  assert.ok(lines.includes("Earlier effects: walked left, 2 times"));
  assert.deepEqual(lines.filter((l) => l.startsWith("Effect")), ["Effect: pushed the box up"]);
  assert.ok(!lines.some((l) => l === "left" || l.trim() === "up"));
});

Deno.test("the Earlier effects line stays within max(max steps, 8) × max field chars however long the episode", () => {
  // An environment whose every step says something new (here, where the player went): 198 runs
  // that nothing merges. Unbounded, the line alone was 198 × ~20 chars for a 2-step window.
  const t = trajectory(false, 200);
  t.steps.forEach((step, k) => step.feedback = `moved to cell ${k + 1}`);
  const lines = buildAnalyzerPrompt(t, { maxSteps: 12, maxFieldChars: 40 }).split("\n");
  const line = lines.find((l) => l.startsWith("Earlier effects: "))!;
  const text = line.slice("Earlier effects: ".length);
  assert.equal(text.length, 12 * 40);
  // A smaller window still gets 8 fields' worth.
  const narrow = buildAnalyzerPrompt(t, { maxSteps: 2, maxFieldChars: 40 }).split("\n")
    .find((l) => l.startsWith("Earlier effects: "))!;
  assert.equal(narrow.length, "Earlier effects: ".length + 8 * 40);
  // Head and tail kept: the first omitted step's effect and the last one's.
  assert.ok(text.startsWith("moved to cell 1; moved to cell 2;"), text);
  assert.ok(text.endsWith("moved to cell 187; moved to cell 188"), text);
  assert.ok(text.includes(" … "));
  // A line within the bound is unchanged, and without maxFieldChars nothing is shortened.
  const short = buildAnalyzerPrompt(t, { maxSteps: 197, maxFieldChars: 40 });
  assert.ok(short.includes("Earlier effects: moved to cell 1; moved to cell 2; moved to cell 3\n"));
  const whole = buildAnalyzerPrompt(t, { maxSteps: 2 }).split("\n");
  assert.equal(
    whole.find((l) => l.startsWith("Earlier effects: ")),
    `Earlier effects: ${t.steps.slice(0, 198).map((s) => s.feedback).join("; ")}`,
  );
});

Deno.test("the analyzer prompt shortens long fields keeping head and tail", () => {
  const t = trajectory(true, 1);
  t.steps[0].response = "a".repeat(50) + "<action>up</action>";
  const prompt = buildAnalyzerPrompt(t, { maxFieldChars: 31 });
  const response = prompt.split("\n").find((l) => l.startsWith("Response: "))!;
  // 31 chars: 14 of the head, " … ", the last 14 of the tail.
  assert.equal(response, `Response: ${"a".repeat(14)} … on>up</action>`);
  assert.equal(response.length - "Response: ".length, 31);
  assert.throws(() => buildAnalyzerPrompt(t, { maxSteps: 0 }), SeedOptionError);
});

Deno.test("parse reads clean JSON", () => {
  assert.deepEqual(
    parseSkillAnalysis('{"episode_summary": "won fast", "episode_skill": "Push boxes up first."}'),
    { episode_summary: "won fast", episode_skill: "Push boxes up first." },
  );
});

const malformed: [string, string, string][] = [
  [
    "a fenced json block with prose around it",
    'Sure! Here is the analysis:\n```json\n{"episode_summary": "s", "episode_skill": "Check the box row first."}\n```\nHope it helps.',
    "Check the box row first.",
  ],
  [
    "trailing commas",
    '{"episode_summary": "s", "episode_skill": "Never push a box into a corner.",}',
    "Never push a box into a corner.",
  ],
  [
    "single quotes with an apostrophe inside",
    "{'episode_summary': 'lost', 'episode_skill': 'Don't push a box into a corner.'}",
    "Don't push a box into a corner.",
  ],
  [
    "several objects: the last usable one wins",
    '{"episode_summary": "a", "episode_skill": "first"} then {"episode_summary": "b", "episode_skill": "second rule"} {"note": 1}',
    "second rule",
  ],
  [
    "bare keys",
    '{episode_summary: "s", episode_skill: "Open the drawer before looking inside."}',
    "Open the drawer before looking inside.",
  ],
  [
    "raw newlines inside the string",
    '{"episode_summary": "s", "episode_skill": "Go to the sink.\nThen clean the mug."}',
    "Go to the sink. Then clean the mug.",
  ],
  [
    "unescaped double quotes inside the string",
    '{"episode_summary": "s", "episode_skill": "Click "buy now" only after choosing the size."}',
    'Click "buy now" only after choosing the size.',
  ],
  [
    "an unbalanced object whose skill string is closed",
    'answer: {"episode_summary": "s", "episode_skill": "Search with the exact product words." ',
    "Search with the exact product words.",
  ],
  [
    "curly quotes",
    "{\u201cepisode_summary\u201d: \u201cs\u201d, \u201cepisode_skill\u201d: \u201cTake the key first.\u201d}",
    "Take the key first.",
  ],
  [
    "the analysis nested under another key",
    '{"analysis": {"episode_summary": "s", "episode_skill": "Cool the apple in the fridge."}}',
    "Cool the apple in the fridge.",
  ],
  [
    "a stray opening brace before the object",
    'Step {1 was bad.\n{"episode_summary": "s", "episode_skill": "Look before you move."}',
    "Look before you move.",
  ],
  [
    "the echoed format example before the real answer",
    'Format: {"episode_summary": "...", "episode_skill": "..."}\nAnswer: {"episode_summary": "x", "episode_skill": "Use {braces} in text."} {"episode_skill": "..."}',
    "Use {braces} in text.",
  ],
  [
    "a skill given as a list of strings",
    '{"episode_summary": "s", "episode_skill": ["Find the lamp.", "Then use it."]}',
    "Find the lamp. Then use it.",
  ],
];

for (const [what, text, skill] of malformed) {
  Deno.test(`parse recovers the skill from ${what}`, () => {
    const parsed = parseSkillAnalysis(text);
    assert.ok(parsed, `no analysis recovered from ${JSON.stringify(text)}`);
    assert.equal(parsed.episode_skill, skill);
  });
}

Deno.test("parse returns null when no non-empty skill is recoverable", () => {
  for (
    const text of [
      "",
      "I cannot analyze this episode.",
      '{"episode_summary": "only a summary"}',
      '{"episode_summary": "s", "episode_skill": ""}',
      '{"episode_summary": "s", "episode_skill": "..."}',
      '{"episode_summary": "s", "episode_skill": 42}',
      '{"episode_summary": "s", "episode_skill": "cut off by the token lim',
    ]
  ) {
    assert.equal(parseSkillAnalysis(text), null, `expected null for ${JSON.stringify(text)}`);
  }
});

Deno.test("parse bounds the skill length at a word boundary", () => {
  const long = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ");
  const parsed = parseSkillAnalysis(JSON.stringify({ episode_summary: "", episode_skill: long }), {
    maxSkillChars: 50,
  })!;
  assert.ok(parsed.episode_skill.length <= 50);
  assert.ok(long.startsWith(parsed.episode_skill + " "));
});

Deno.test("analysisTarget round-trips through parse", () => {
  const analysis = {
    episode_summary: 'The agent pushed the "left" box, then won.',
    episode_skill: "Move boxes away from walls first; don't block goals.",
  };
  const target = analysisTarget(analysis);
  assert.ok(!target.includes("\n"));
  assert.deepEqual(JSON.parse(target), analysis);
  assert.deepEqual(parseSkillAnalysis(target), analysis);
});

Deno.test("an analysis cut off inside its summary still yields the skill, which comes first", () => {
  const analysis = {
    episode_summary: "Solved in 9 steps: walked up 1, pushed the box left 2, walked down 1.",
    episode_skill: "Walk behind the box, then push it left onto the target.",
  };
  const target = analysisTarget(analysis);
  assert.ok(target.indexOf("episode_skill") < target.indexOf("episode_summary"));
  const cut = target.slice(0, target.indexOf("walked down"));
  assert.equal(parseSkillAnalysis(cut)?.episode_skill, analysis.episode_skill);
});

const policyPrompt = [
  "You are an expert agent playing Sokoban.",
  "Your task is to: push every box onto a goal",
  "Your last 2 steps: up, left",
  "Now it's your turn to take an action.",
].join("\n");

// The block as the reference code's seed/prompting.py writes it (github.com/lljcic2024-boop/
// agent_rl at 2cf2fad, `build_augmented_observation_text`): heading, instruction line, [skill].
const BLOCK = [
  "**Episode-Level Skill**",
  "Refer to this episode-level skill when deciding what action to take in the current episode:",
  "[Push boxes up first.]",
];

Deno.test("the skill block follows the task line after a blank line and ends with one", () => {
  const out = insertSkill(policyPrompt, "  Push boxes up first. \n");
  assert.equal(
    out,
    [
      "You are an expert agent playing Sokoban.",
      "Your task is to: push every box onto a goal",
      "",
      ...BLOCK,
      "",
      "Your last 2 steps: up, left",
      "Now it's your turn to take an action.",
    ].join("\n"),
  );
});

Deno.test("the skill is only stripped: a line break inside it stays, as the reference's strip()", () => {
  // seed/prompting.py `_format_skill_section`: body_text = str(body).strip()
  const out = insertSkill("Your task is to: x", "\t Push boxes\n up first. \n");
  assert.equal(
    out,
    ["Your task is to: x", "", ...BLOCK.slice(0, 2), "[Push boxes", " up first.]"].join("\n"),
  );
});

Deno.test("the skill goes after a task line that ends the prompt, after a blank line", () => {
  assert.equal(
    insertSkill("Your task is to: x", "Push boxes up first."),
    ["Your task is to: x", "", ...BLOCK].join("\n"),
  );
});

Deno.test("the reference's other task lines count too (Your goal is …)", () => {
  assert.equal(
    insertSkill("Intro.\nYour goal is to win.\nGrid:", "Push boxes up first."),
    ["Intro.", "Your goal is to win.", "", ...BLOCK, "", "Grid:"].join("\n"),
  );
});

Deno.test("without a task line the skill goes before Now it's your turn, a blank line each side", () => {
  const prompt = "Grid:\n#@ #\nNow it's your turn to act.\nAnswer in <action></action>.";
  assert.equal(
    insertSkill(prompt, "Push boxes up first."),
    [
      "Grid:",
      "#@ #",
      "",
      ...BLOCK,
      "",
      "Now it's your turn to act.",
      "Answer in <action></action>.",
    ].join("\n"),
  );
});

Deno.test("with neither line the skill is appended after a blank line", () => {
  assert.equal(
    insertSkill("Grid:\n#@ #", "Push boxes up first."),
    ["Grid:", "#@ #", "", ...BLOCK].join("\n"),
  );
});

Deno.test("an empty skill cannot be inserted", () => {
  assert.throws(() => insertSkill(policyPrompt, " ... "), SkillError);
});

// The critical-step block as seed/prompting.py writes it (`_format_skill_section("Critical-Step
// Skill", "Use this current-step skill for this decision only", …)`), placed by
// `_insert_before_anchor` before "Now it's your turn to".
const STEP_BLOCK = [
  "**Critical-Step Skill**",
  "Use this current-step skill for this decision only:",
  "[go to sinkbasin 1: the soapbar 1 is in it.]",
];

Deno.test("a critical-step skill goes before Now it's your turn, a blank line each side, with no episode block", () => {
  assert.equal(
    insertStepSkill(policyPrompt, " go to sinkbasin 1: the soapbar 1 is in it.\n"),
    [
      "You are an expert agent playing Sokoban.",
      "Your task is to: push every box onto a goal",
      "Your last 2 steps: up, left",
      "",
      ...STEP_BLOCK,
      "",
      "Now it's your turn to take an action.",
    ].join("\n"),
  );
  // Without the anchor the block is appended after a blank line; an empty skill is refused.
  assert.equal(
    insertStepSkill("Grid:\n#@ #", "go to sinkbasin 1: the soapbar 1 is in it."),
    ["Grid:", "#@ #", "", ...STEP_BLOCK].join("\n"),
  );
  assert.throws(() => insertStepSkill(policyPrompt, " : "), SkillError);
});

Deno.test("a turn with a step skill is scored under it alone; the trajectory's other turns under the episode skill", () => {
  const analyses = new Map([
    ["t1", {
      episode_summary: "",
      episode_skill: "Push boxes up first.",
      // "x" is no turn, 7 is past the trajectory's end, "2" is blank: all three are dropped.
      step_skills: {
        "1": "go to sinkbasin 1: the soapbar 1 is in it.",
        x: "a",
        "7": "b",
        "2": " ",
      },
    }],
    ["t2", null],
  ]);
  const turns = new Map([["t1", 3], ["t2", 3]]);
  const steps = stepSkillsByTrajectory(analyses, turns, 5);
  assert.deepEqual([...steps], [[
    "t1",
    new Map([[1, "go to sinkbasin 1: the soapbar 1 is in it."]]),
  ]]);
  const samples = [0, 1, 2].flatMap((turn) =>
    ["t1", "t2"].map((trajectoryId) => ({ prompt: policyPrompt, trajectoryId, turn }))
  );
  const skills = new Map([["t1", "Push boxes up first."], ["t2", null]]);
  const prompts = teacherPrompts(samples, skills, steps);
  assert.deepEqual(prompts, [
    insertSkill(policyPrompt, "Push boxes up first."),
    null,
    insertStepSkill(policyPrompt, "go to sinkbasin 1: the soapbar 1 is in it."),
    null,
    insertSkill(policyPrompt, "Push boxes up first."),
    null,
  ]);
  // max 0 (the authors' episode_only) keeps none; max 1 keeps the first in key order.
  assert.equal(stepSkillsByTrajectory(analyses, turns, 0).size, 0);
  const two = new Map([["t", {
    episode_summary: "",
    episode_skill: "s",
    step_skills: { "2": "b", "0": "a" },
  }]]);
  // Integer-like keys iterate in ascending order in JavaScript objects, as in a JSON parse.
  assert.deepEqual([...stepSkillsByTrajectory(two, new Map([["t", 3]]), 1).get("t")!], [[0, "a"]]);
});

/**
 * Decodes one object under `decoder` from random logits (seeded): tokens holding a quote,
 * backslash, brace, comma or non-ASCII byte are favoured on even seeds, every fourth seed is
 * greedy, and seeds not divisible by 3 take the tokens the schema forces undrawn (jump-forward).
 * Asserts the object closed within the budget; returns its text.
 */
function decodeRandom(decoder: JsonConstrainedDecoder, tok: Tokenizer, seed: number): string {
  const bytes = tokenBytes(tok);
  const tricky = bytes.flatMap((b, id) =>
    b && b.some((x) => [0x22, 0x5c, 0x7b, 0x7d, 0x2c].includes(x) || x >= 0x80) ? [id] : []
  );
  const rng = new Rng(seed), c = decoder.start(), ids: number[] = [];
  const budget = seed % 4 === 0 ? 96 : decoder.minTokens + (seed % 10);
  const logits = new Float32Array(decoder.vocabSize);
  /** Jump-forward decoding on two seeds in three: the forced tokens are accepted undrawn. */
  const jump = () => {
    if (seed % 3 === 0) return;
    for (const id of c.forcedTokens(budget - ids.length)) (ids.push(id), c.accept(id));
  };
  jump();
  while (ids.length < budget && !c.done) {
    for (let i = 0; i < logits.length; i++) logits[i] = (rng.next() - 0.5) * 8;
    if (seed % 2 === 0) { for (const id of tricky) logits[id] += 4; }
    c.maskLogits(logits, budget - ids.length);
    const id = sampleToken(logits, { greedy: seed % 4 === 1, temperature: 1, topP: 1 }, rng);
    ids.push(id);
    c.accept(id);
    jump();
  }
  const text = tok.decode(ids, { skipSpecialTokens: true }).trim();
  assert.ok(c.done && ids.length <= budget, `seed ${seed}: ${ids.length}/${budget} ${text}`);
  return text;
}

/** The builtin-style byte-level tokenizer of the analyzer's vocabulary. */
const builtinTokenizer = () =>
  new Tokenizer(
    buildByteLevelTokenizer([...analyzerTemplateVocabulary(), "never", "push", "box", "corner"]),
  );

Deno.test("every analysis decoded under the analysis schema from random logits parses to its own skill (GPT-2 and builtin)", () => {
  const builtin = builtinTokenizer();
  for (const tok of [gpt2Tokenizer(), builtin]) { // GPT-2 with its clean-up of spaces, as loaded
    const decoder = new JsonConstrainedDecoder(tokenBytes(tok), analysisSchema());
    const seeds = tok === builtin ? 200 : 24;
    for (let seed = 0; seed < seeds; seed++) {
      const text = decodeRandom(decoder, tok, seed);
      const strict = JSON.parse(text);
      assert.deepEqual(Object.keys(strict), ["episode_skill", "episode_summary"]);
      const collapse = (s: string) => s.replace(/\s+/g, " ").trim();
      assert.deepEqual(parseSkillAnalysis(text), {
        episode_skill: collapse(strict.episode_skill),
        episode_summary: collapse(strict.episode_summary),
      }, text);
    }
  }
});

Deno.test("under Sokoban's skill pattern every skill decoded from random logits is a well-formed sentence of its grammar", () => {
  const builtin = builtinTokenizer();
  const { won, lost } = SOKOBAN_SKILL_PATTERNS;
  const schema = analysisSchema({ skillPattern: { oneOf: [won, lost] } });
  const kinds = new Set<string>();
  for (const tok of [gpt2Tokenizer(), builtin]) {
    const decoder = new JsonConstrainedDecoder(tokenBytes(tok), schema);
    const seeds = tok === builtin ? 120 : 24;
    for (let seed = 0; seed < seeds; seed++) {
      const text = decodeRandom(decoder, tok, seed);
      const skill = parseSkillAnalysis(text)?.episode_skill;
      assert.ok(skill !== undefined, text);
      assert.equal(JSON.parse(text).episode_skill, skill, "written raw, one space apart");
      assert.ok(matchesSkillGrammar(SOKOBAN_SKILL_GRAMMAR, skill), skill);
      kinds.add(skill.slice(0, 10));
    }
  }
  assert.ok(kinds.size >= 4, [...kinds].join(" | "));
  // the shortest object now spells a whole sentence, so it takes more tokens than free text
  const free = new JsonConstrainedDecoder(tokenBytes(builtin), analysisSchema()).minTokens;
  const held = new JsonConstrainedDecoder(tokenBytes(builtin), schema).minTokens;
  assert.ok(held > free + 5, `${held} vs ${free}`);
});

Deno.test("under the household skill pattern every skill decoded from random logits is well-formed, and the shortest object fits the household budgets", async () => {
  const household = toAsyncEnvironment(getEnvironment("household"));
  const tok = new Tokenizer(buildByteLevelTokenizer(await builtinVocabulary(household)));
  const { won, lost } = householdSkillPatterns();
  const schema = analysisSchema({ skillPattern: { oneOf: [won, lost] } });
  const decoder = new JsonConstrainedDecoder(tokenBytes(tok), schema);
  const kinds = new Set<string>();
  for (let seed = 0; seed < 16; seed++) {
    const skill = parseSkillAnalysis(decodeRandom(decoder, tok, seed))?.episode_skill;
    assert.ok(skill !== undefined && matchesSkillGrammar(HOUSEHOLD_SKILL_GRAMMAR, skill), skill);
    kinds.add(skill.slice(0, 12));
  }
  assert.ok(kinds.size >= 3, [...kinds].join(" | "));
  // the shortest object spells a whole usual-places sentence: 35 tokens with the builtin
  // tokenizer (20 free), within the household preset's analyzer budget and bench:learn's (both 192)
  const free = new JsonConstrainedDecoder(tokenBytes(tok), analysisSchema()).minTokens;
  assert.ok(decoder.minTokens > free + 10, `${decoder.minTokens} vs ${free}`);
  // each outcome's schema (the analyzer decodes a lost trajectory under the failure sentences)
  for (const pattern of [won, lost]) {
    const own = new JsonConstrainedDecoder(
      tokenBytes(tok),
      analysisSchema({ skillPattern: pattern }),
    );
    assert.ok(
      own.minTokens <= parseJobSpec(DEMO_PRESETS.household).seed.analyzer_max_new_tokens,
      `${own.minTokens}`,
    );
  }
});

Deno.test("escaped quotes, unicode and curly quotes in a skill survive the schema and the parser", () => {
  const schema = analysisSchema();
  const a = new JsonObjectAutomaton(schema);
  const accepts = (text: string) => {
    const st = new Int32Array(STATE_FIELDS);
    a.init(st, 0);
    return new TextEncoder().encode(text).every((b) => a.step(st, 0, b)) && a.isDone(st, 0);
  };
  const skill = 'Say "no" to corners \\ é 中 😀 \u201cquoted\u201d';
  const text = analysisTarget({ episode_skill: skill, episode_summary: "x" });
  assert.equal(accepts(text), false, "raw curly double quotes are refused");
  const escaped = text.replace(/\u201c/g, "\\u201c").replace(/\u201d/g, "\\u201d");
  assert.equal(accepts(escaped), true);
  assert.equal(parseSkillAnalysis(escaped)?.episode_skill, skill);
  assert.equal(accepts(analysisTarget({ episode_skill: "...", episode_summary: "x" })), false);
  assert.equal(
    parseSkillAnalysis(analysisTarget({ episode_skill: "...", episode_summary: "x" })),
    null,
  );
  const long = "a".repeat(401);
  assert.equal(accepts(analysisTarget({ episode_skill: long, episode_summary: "" })), false);
  assert.equal(
    accepts(analysisTarget({ episode_skill: long.slice(1), episode_summary: "" })),
    true,
  );
});

/** Whether `schema`'s automaton accepts `text` whole. */
function admits(schema: ReturnType<typeof analysisSchema>, text: string): boolean {
  const a = new JsonObjectAutomaton(schema);
  const st = new Int32Array(STATE_FIELDS);
  a.init(st, 0);
  return new TextEncoder().encode(text).every((b) => a.step(st, 0, b)) && a.isDone(st, 0);
}

Deno.test("without the summary the analysis schema admits the skill alone and nothing with a summary", () => {
  const off = analysisSchema({ summary: false });
  const spaced = analysisSchema({ summary: false, maxWhitespace: 4 });
  for (const text of ['{"episode_skill":"push up"}', '{ "episode_skill" :  "push up" }']) {
    assert.ok(admits(spaced, text), text);
    assert.deepEqual(parseSkillAnalysis(text), { episode_skill: "push up", episode_summary: "" });
  }
  // by default no whitespace between the object's tokens (the warm-up target's compact form)
  assert.ok(admits(off, '{"episode_skill":"push up"}'));
  assert.equal(admits(off, '{ "episode_skill":"push up"}'), false);
  assert.equal(admits(off, '{"episode_skill":"push up"\n}'), false);
  const both = analysisTarget({ episode_skill: "push up", episode_summary: "went up" });
  assert.ok(admits(analysisSchema(), both));
  for (
    const text of [
      both,
      '{"episode_skill":"push up","episode_summary":""}',
      '{"episode_summary":"went up","episode_skill":"push up"}',
      '{"episode_skill":"push up",}',
      '{"episode_skill":"..."}',
    ]
  ) assert.equal(admits(off, text), false, text);
  assert.equal(admits(analysisSchema(), '{"episode_skill":"push up"}'), false);
  // an unclosed object whose skill pair is closed still yields its skill
  assert.deepEqual(parseSkillAnalysis('{"episode_skill": "push up", "episode_summary'), {
    episode_skill: "push up",
    episode_summary: "",
  });
});

Deno.test("every analysis decoded without the summary from random logits parses to its own skill and an empty summary", () => {
  const builtin = builtinTokenizer();
  for (const tok of [gpt2Tokenizer(), builtin]) {
    const decoder = new JsonConstrainedDecoder(tokenBytes(tok), analysisSchema({ summary: false }));
    const withSummary = new JsonConstrainedDecoder(tokenBytes(tok), analysisSchema());
    assert.ok(decoder.minTokens < withSummary.minTokens, `${decoder.minTokens}`);
    const seeds = tok === builtin ? 200 : 24;
    for (let seed = 0; seed < seeds; seed++) {
      const text = decodeRandom(decoder, tok, seed);
      const strict = JSON.parse(text);
      assert.deepEqual(Object.keys(strict), ["episode_skill"]);
      const skill = strict.episode_skill.replace(/\s+/g, " ").trim();
      assert.deepEqual(parseSkillAnalysis(text), { episode_skill: skill, episode_summary: "" });
      // the same skill is one the schema with the summary admits, and the other way round
      const target = analysisTarget({ episode_skill: strict.episode_skill, episode_summary: "" });
      assert.ok(admits(analysisSchema(), target), target);
      const other = JSON.parse(decodeRandom(withSummary, tok, seed)).episode_skill;
      assert.ok(
        admits(analysisSchema({ summary: false }), JSON.stringify({ episode_skill: other })),
      );
    }
  }
});

/**
 * Decodes greedily under `decoder` with `logits[t]` at step t (the same draws for every decoder
 * it is given) within `budget` tokens; returns the text.
 */
function decodeReplayed(
  decoder: JsonConstrainedDecoder,
  tok: Tokenizer,
  logits: readonly Float32Array[],
): string {
  const c = decoder.start(), ids: number[] = [];
  for (let t = 0; t < logits.length && !c.done; t++) {
    const step = Float32Array.from(logits[t]);
    c.maskLogits(step, logits.length - t);
    const id = sampleToken(step, { greedy: true, temperature: 1, topP: 1 }, new Rng(0));
    ids.push(id);
    c.accept(id);
  }
  assert.ok(c.done);
  return tok.decode(ids, { skipSpecialTokens: true }).trim();
}

Deno.test("given the same logits, greedy decoding writes the same skill with and without the summary where the budget does not bind (builtin tokenizer)", () => {
  const tok = builtinTokenizer();
  const { won, lost } = SOKOBAN_SKILL_PATTERNS;
  for (const skillPattern of [undefined, { oneOf: [won, lost] }]) {
    const on = new JsonConstrainedDecoder(tokenBytes(tok), analysisSchema({ skillPattern }));
    const off = new JsonConstrainedDecoder(
      tokenBytes(tok),
      analysisSchema({ skillPattern, summary: false }),
    );
    const skills = new Set<string>();
    for (let seed = 0; seed < 24; seed++) {
      const rng = new Rng(seed);
      // A budget that never binds inside the skill (≤ 400 UTF-16 units: ≤ 800 bytes, each at
      // least one token, then the summary's shortest completion). Where it binds, the schema
      // with the summary must close the skill earlier, to leave room for its summary.
      const logits = Array.from({ length: 900 }, () => {
        const l = new Float32Array(on.vocabSize);
        for (let i = 0; i < l.length; i++) l[i] = (rng.next() - 0.5) * 8;
        return l;
      });
      const a = parseSkillAnalysis(decodeReplayed(on, tok, logits))!;
      const b = parseSkillAnalysis(decodeReplayed(off, tok, logits))!;
      assert.equal(b.episode_skill, a.episode_skill, `seed ${seed}`);
      assert.equal(b.episode_summary, "");
      skills.add(a.episode_skill);
    }
    assert.ok(skills.size >= 8, `${skills.size} distinct skills`);
  }
});
