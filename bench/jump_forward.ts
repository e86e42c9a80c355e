/**
 * `deno task bench:jump-forward` (flags: `USAGE` below, which `--help` prints): SEED's analysis
 * call with and without jump-forward decoding (workers/model/generate.ts,
 * constrained_decoding.ts), under the analysis schema with and without whitespace between the
 * object's tokens.
 *
 * One rollout of the sokoban demo preset (8 tasks × 8, sampled at temperature 1) gives 64
 * trajectories; each configuration then analyses all 64 greedily under the preset's schemas
 * (skill held to Sokoban's grammar, won or lost by outcome, each outcome's shared instruction
 * prefix prefilled once), as the trainer does. The
 * configurations alternate in one process (order reversed every other round) and report medians:
 * the whole call, its prefill and decode parts (decode-session calls are timed one by one; the
 * prefill is every call before the first draw), the number of decode calls, the texts that differ
 * between configurations and how many skills `judgeSkill` finds truthful. `--checkpoint` is an HF
 * model folder (config.json, model.safetensors, tokenizer.json), e.g. a warm-up cached by
 * `bench:learn --warmup-cache DIR` (`DIR/<key>`, the folder its progress line names; the key covers
 * the spec, thread count and code: bench/_warmup_cache.ts); without it a fresh builtin:tiny
 * (random weights: timing only). Machines are shared: compare ratios within one run. Run by hand;
 * never in CI. Configurations in the output: `ws4`/`ws0` the schema's `maxWhitespace` (4: up to 4
 * whitespace bytes between the object's tokens; 0: none, the default), `off`/`on` jump-forward.
 */
import * as ort from "onnxruntime-node";
import { DEMO_PRESETS } from "../jobs/presets.ts";
import { maxTurnsOf, parseJobSpec } from "../jobs/spec.ts";
import { getEnvironment, resolveEnvironment } from "../workers/envs/mod.ts";
import { hfFolderReader, loadHfDirectory } from "../workers/model/hf.ts";
import {
  type JsonObjectSchema,
  JsonSequenceConstraint,
  Policy,
  Tokenizer,
} from "../workers/model/mod.ts";
import { ACTION_STOP, runRollouts, TextPolicy } from "../workers/seed/mod.ts";
import { analysisSchema, buildAnalyzerPrompt, parseSkillAnalysis } from "../workers/skills/mod.ts";
import { resolveModel } from "../workers/seed/run/mod.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints: how to run the bench and what each flag does. */
const USAGE = `SEED's analysis call with and without jump-forward decoding, under the analysis
schema with and without whitespace between the object's tokens; configurations
alternate in one process.

Usage:
  deno task bench:jump-forward [--checkpoint DIR] [--reps 5]

Flags:
  --checkpoint DIR  an HF model folder (config.json, model.safetensors, tokenizer.json), e.g. a
                    warm-up cached by bench:learn --warmup-cache DIR (DIR/<key>, the folder its
                    progress line names); without it a fresh builtin:tiny (random weights: timing
                    only)
  --reps N          rounds of every configuration; medians are printed (default 5)`;

const args = benchArgs({
  name: "bench:jump-forward",
  usage: USAGE,
  options: { checkpoint: { type: "string" }, reps: { type: "string", default: "5" } },
});
const reps = Number(args.reps);
if (!(Number.isInteger(reps) && reps >= 1)) {
  console.error(
    `Cannot run the bench as --reps must be an integer ≥ 1: current value is ${args.reps}`,
  );
  Deno.exit(2);
}
const spec = parseJobSpec(DEMO_PRESETS.sokoban);
const env = await resolveEnvironment("sokoban");
const model = args.checkpoint
  ? await loadHfDirectory(hfFolderReader(args.checkpoint))
  : await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
const policy = new Policy(model.config, model.parameters, { threads: 2 });
const text = new TextPolicy(policy, new Tokenizer(model.tokenizer));

// ---- one rollout: 64 trajectories, as a SEED step samples them
let turn = 0;
const tasks = await env.sampleTasks("train", 8, 4243, spec.env.options);
const trajectories = await runRollouts({
  env,
  tasks,
  groupSize: 8,
  maxTurns: maxTurnsOf(spec, env),
  historyLength: 0,
  policy: async (prompts: string[]) =>
    (await text.generate(prompts, {
      maxNewTokens: spec.rollout.max_new_tokens,
      temperature: 1,
      seed: 7919 * ++turn,
      stop: [ACTION_STOP],
    })).texts,
});
const prompts = trajectories.map((t) =>
  buildAnalyzerPrompt(t, {
    maxSteps: spec.seed.analyzer_max_steps,
    maxFieldChars: spec.seed.analyzer_max_field_chars,
  })
);
const won = trajectories.map((t) => t.won);
const lengths = prompts.map((p) => text.promptIds(p).length).sort((a, b) => a - b);

// ---- decode-session calls, timed one by one: prefill calls come before the first draw (the
// first masked row of logits), decode calls after it
let calls: { decode: boolean; ms: number }[] = [];
let drawn = false;
const mask = JsonSequenceConstraint.prototype.maskLogits;
JsonSequenceConstraint.prototype.maskLogits = function (logits, remaining) {
  drawn = true;
  return mask.call(this, logits, remaining);
};
const proto = (ort.InferenceSession as unknown as {
  prototype: { run: (...a: unknown[]) => Promise<unknown> };
}).prototype;
const run = proto.run;
proto.run = async function (this: unknown, ...a: unknown[]) {
  const t0 = performance.now();
  const out = await run.apply(this, a);
  calls.push({ decode: drawn, ms: performance.now() - t0 });
  return out;
};

const configs = [
  { name: "ws4 off", maxWhitespace: 4, jumpForward: false },
  { name: "ws4 on", maxWhitespace: 4, jumpForward: true },
  { name: "ws0 off", maxWhitespace: 0, jumpForward: false },
  { name: "ws0 on", maxWhitespace: 0, jumpForward: true }, // the default since
];
const schemasOf = (maxWhitespace: number): JsonObjectSchema[] => {
  const patterns = env.skillPatterns!, summary = false;
  const won_ = analysisSchema({ skillPattern: patterns.won, summary, maxWhitespace });
  const lost = analysisSchema({ skillPattern: patterns.lost, summary, maxWhitespace });
  return won.map((w) => (w ? won_ : lost));
};
const options = (c: (typeof configs)[number]) => ({
  maxNewTokens: spec.seed.analyzer_max_new_tokens,
  temperature: 0,
  seed: 0,
  schema: schemasOf(c.maxWhitespace),
  jumpForward: c.jumpForward,
  sharePrefixes: true, // as the trainer's analysis (analyzerGenerateOptions)
});
for (const c of configs) { // build the decoders (they index the vocabulary) outside the timing
  const o = options(c);
  await text.generate(prompts.slice(0, 2), { ...o, schema: o.schema.slice(0, 2) });
}

const total: Record<string, number[]> = {}, prefill: Record<string, number[]> = {};
const decode: Record<string, number[]> = {}, runs: Record<string, number> = {};
const texts: Record<string, string[]> = {}, tokens: Record<string, number> = {};
for (let r = 0; r < reps; r++) {
  for (const c of r % 2 ? [...configs].reverse() : configs) {
    const o = options(c);
    calls = [];
    drawn = false;
    const t0 = performance.now();
    const g = await text.generate(prompts, o);
    (total[c.name] ??= []).push(performance.now() - t0);
    const sum = (decode: boolean) =>
      calls.filter((x) => x.decode === decode).reduce((n, x) => n + x.ms, 0);
    (prefill[c.name] ??= []).push(sum(false));
    (decode[c.name] ??= []).push(sum(true));
    runs[c.name] = calls.filter((x) => x.decode).length;
    texts[c.name] = g.texts;
    tokens[c.name] = g.tokens;
  }
}
proto.run = run;
JsonSequenceConstraint.prototype.maskLogits = mask;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sokoban = getEnvironment("sokoban");
console.log(
  `${prompts.length} analyses (${won.filter(Boolean).length} won), prompts ${lengths[0]}–${
    lengths.at(-1)
  } tokens, ${reps} rounds; medians in ms`,
);
const base = configs[0].name;
for (const c of configs) {
  const truthful = texts[c.name].filter((t, i) => {
    const skill = parseSkillAnalysis(t)?.episode_skill;
    return skill !== undefined && sokoban.judgeSkill!(trajectories[i], skill).truthful;
  }).length;
  const differ = configs.map((d) =>
    `${d.name} ${texts[c.name].filter((t, i) => t !== texts[d.name][i]).length}`
  );
  console.log(
    `${c.name}: call ${median(total[c.name]).toFixed(0)} (×${
      (median(total[base]) / median(total[c.name])).toFixed(2)
    }), prefill ${median(prefill[c.name]).toFixed(0)}, decode ${
      median(decode[c.name]).toFixed(0)
    } (×${(median(decode[base]) / median(decode[c.name])).toFixed(2)}) in ${
      runs[c.name]
    } calls; tokens ${
      tokens[c.name]
    }, truthful ${truthful}/${prompts.length}; texts differing from ${differ.join(", ")}`,
  );
}
await policy.release();
