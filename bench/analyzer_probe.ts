/**
 * Analyzer probe (run by hand, not a test): does more analyzer SFT make a warmed builtin:tiny
 * analyzer write skills that are true of their trajectory? Loads a step-0 checkpoint (a Hugging
 * Face folder, e.g. one `bench:learn --warmup-cache DIR` keeps), plays 16 train tasks × 8 copies of
 * the demo's Sokoban at `--temperature` (above 1 for more failures), analyzes each trajectory
 * greedily under the demo preset's schema and grammar (`analyzerGenerateOptions`), and judges each
 * skill against the reference analyzer (`judgeSkill`): truthful counts of won and lost
 * trajectories and the most frequent skills. Then SFT on `--episodes` more analyses of the
 * policy's own trajectories (reference analysis as target) beside expert demonstrations (one per
 * analysis up to 8×, so the policy keeps acting), `--epochs` passes at `--lr`, batch 32, and the
 * same judgement again on the same tasks.
 *
 *   deno run -A bench/analyzer_probe.ts --checkpoint DIR [--episodes 768] [--epochs 3]
 *     [--lr 2e-3] [--window 3] [--temperature 1.5] [--seed 1]
 *
 * `--window` is the analyzer prompt's `analyzer_max_steps` (with the Effect lines,
 * `analyzer_max_field_chars` 200 as in the preset). Measurements: README.md, Algorithm, step 3.
 */
import { parseArgs } from "node:util";
import { getEnvironment, toAsyncEnvironment } from "../workers/envs/mod.ts";
import { hfFolderReader, loadHfDirectory } from "../workers/model/hf.ts";
import { Policy, Tokenizer } from "../workers/model/mod.ts";
import {
  ACTION_STOP,
  analyzerSamples,
  buildAnalyzerPrompt,
  expertSamples,
  parseSkillAnalysis,
  runRollouts,
  sftTrain,
  TextPolicy,
} from "../workers/seed/mod.ts";
import { analyzerGenerateOptions } from "../workers/seed/trainer.ts";
import { parseJobSpec } from "../jobs/spec.ts";
import { DEMO_PRESETS } from "../jobs/presets.ts";

const { values: a } = parseArgs({
  options: {
    checkpoint: { type: "string" },
    episodes: { type: "string", default: "768" },
    epochs: { type: "string", default: "3" },
    lr: { type: "string", default: "2e-3" },
    window: { type: "string", default: "3" },
    temperature: { type: "string", default: "1.5" },
    seed: { type: "string", default: "1" },
  },
});
if (a.checkpoint === undefined) {
  console.error(
    "Cannot run the probe as --checkpoint must name a checkpoint folder: current value is none",
  );
  Deno.exit(2);
}
const seed = Number(a.seed);
const m = await loadHfDirectory(hfFolderReader(a.checkpoint));
const policy = new Policy(m.config, m.parameters, { threads: 2 });
const text = new TextPolicy(policy, new Tokenizer(m.tokenizer));
const sokoban = getEnvironment("sokoban");
const env = toAsyncEnvironment(sokoban);
const spec = parseJobSpec(DEMO_PRESETS.sokoban);
const envOptions = { relative_positions: true, prompt: "compact" };
const prompt = { maxSteps: Number(a.window), maxFieldChars: 200, feedback: true };
const data = { env, envOptions, maxTurns: 20, historyLength: 0 };
const t0 = performance.now();
const secs = () => ((performance.now() - t0) / 1000).toFixed(0);

/** Plays the probe's tasks, analyzes every trajectory and prints the truthful counts. */
async function judge(label: string): Promise<void> {
  let turn = 0;
  const tasks = await env.sampleTasks("train", 16, 4242 + seed, envOptions);
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 8,
    maxTurns: 20,
    historyLength: 0,
    policy: async (prompts: string[]) =>
      (await text.generate(prompts, {
        maxNewTokens: 8,
        temperature: Number(a.temperature),
        seed: (seed + 7919 * ++turn) >>> 0,
        stop: [ACTION_STOP],
      })).texts,
  });
  const prompts = trajectories.map((t) => buildAnalyzerPrompt(t, prompt));
  const won = trajectories.map((t) => t.won);
  const g = await text.generate(prompts, analyzerGenerateOptions(spec, env, won));
  const count = { won: [0, 0], lost: [0, 0] };
  const seen = new Map<string, number>();
  trajectories.forEach((t, i) => {
    const skill = parseSkillAnalysis(g.texts[i])?.episode_skill ?? "(none)";
    const c = t.won ? count.won : count.lost;
    c[0] += sokoban.judgeSkill!(t, skill).truthful ? 1 : 0;
    c[1]++;
    seen.set(skill, (seen.get(skill) ?? 0) + 1);
  });
  console.log(
    `${label} (${secs()} s): truthful won ${count.won[0]}/${count.won[1]}, lost ${count.lost[0]}/${
      count.lost[1]
    }; ${seen.size} distinct skills, most frequent:`,
  );
  for (const [skill, n] of [...seen].sort((x, y) => y[1] - x[1]).slice(0, 5)) {
    console.log(`  ${n} × ${skill}`);
  }
}

await judge("before");
const analyses = await analyzerSamples(text, {
  ...data,
  episodes: Number(a.episodes),
  seed: 9001,
  temperature: Number(a.temperature),
  maxNewTokens: 8,
  prompt,
});
const demos = await expertSamples(text, { ...data, episodes: 200, seed: 9002 });
const replay = demos.samples.slice(0, analyses.samples.length * 8);
console.log(
  `data: ${analyses.samples.length} analyses (${analyses.won} won), ${replay.length} demonstrations (${secs()} s)`,
);
const r = await sftTrain(text, [{
  samples: [...analyses.samples, ...replay],
  epochs: Number(a.epochs),
}], { batchSize: 32, lr: Number(a.lr), maxGradNorm: 1, seed: 5 });
console.log(
  `SFT: ${r.optimizerSteps} steps, loss ${r.firstLoss.toFixed(3)} → ${
    r.lastLoss.toFixed(3)
  } (${secs()} s)`,
);
await judge("after");
