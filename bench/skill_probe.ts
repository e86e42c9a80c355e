/**
 * Skill probe (run by hand, not a test): does the policy read a skill in its prompt? Measures,
 * for builtin:tiny on Sokoban (the demo's small-model options), the teacher gap Δ = ℓ_T − ℓ_old
 * that SEED's distillation feeds on, with a perfect analyzer (the environment's reference skill
 * of each trajectory), after a policy warm-up with or without skill-conditioned demonstrations
 * (workers/seed/warmup.ts `expertSamples`: `skillShare`, `correctiveShare`).
 *
 *   deno run -A bench/skill_probe.ts [--seed 1] [--skill-share 0.5] [--corrective-share 0]
 *     [--base .bench-out/probe-warm-1.f32] [--steps 224] [--eval-episodes 100]
 *
 * Stage 1 (cached in `--base`): 784 SFT steps of batch 32 on ordinary demonstrations (the demo's
 * warm-up). Stage 2: `--steps` more SFT steps on demonstrations of which a `--skill-share` carry
 * their episode's skill, plus `--corrective-share` corrective samples (the control arm is
 * `--skill-share 0`). Then: 64 rollouts (8 train tasks × 8, temperature 1) scored with and
 * without their reference skill — mean Δ per response token of won and of lost trajectories and
 * corr(per-sample mean Δ, GiGPO advantage) — and test_seen success at temperature 1 with the
 * ordinary prompt and with the reference skill of an expert solve of the same task in the prompt
 * (does a skill help the policy that reads it?).
 */
import { parseArgs } from "node:util";
import { getEnvironment, type Task, toAsyncEnvironment } from "../workers/envs/mod.ts";
import { parameterSpecs, Policy, type Sample, Tokenizer } from "../workers/model/mod.ts";
import {
  ACTION_STOP,
  buildSamples,
  expertSamples,
  insertSkill,
  resolveModel,
  runRollouts,
  sftTrain,
  TextPolicy,
} from "../workers/seed/mod.ts";

const { values: a } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    "skill-share": { type: "string", default: "0.5" },
    "corrective-share": { type: "string", default: "0" },
    base: { type: "string" },
    steps: { type: "string", default: "224" },
    "eval-episodes": { type: "string", default: "100" },
  },
});
const seed = Number(a.seed);
const env = toAsyncEnvironment(getEnvironment("sokoban"));
const envOptions = { relative_positions: true, prompt: "compact" };
const model = await resolveModel("builtin:tiny", { env, seed, artifacts: null as never });
const policy = new Policy(model.config, model.parameters, { threads: 2 });
const text = new TextPolicy(policy, new Tokenizer(model.tokenizer));
const t0 = performance.now();
const secs = () => ((performance.now() - t0) / 1000).toFixed(0);
const data = { env, envOptions, episodes: 400, maxTurns: 20, historyLength: 0, seed: 1000 + seed };
const sft = (samples: Sample[], steps: number) =>
  sftTrain(text, [{ samples, epochs: Math.max(1, Math.round((steps * 32) / samples.length)) }], {
    batchSize: 32,
    lr: 2e-3,
    maxGradNorm: 1,
    seed,
  });

// Stage 1: the ordinary warm-up, cached as raw float32 in parameter-spec order.
const base = a.base ?? `.bench-out/probe-warm-${seed}.f32`;
const specs = parameterSpecs(model.config);
const bytes = await Deno.readFile(base).catch(() => null);
if (bytes) {
  const f = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  let o = 0;
  for (const s of specs) {
    const p = model.parameters.get(s.name)!;
    p.set(f.subarray(o, o + p.length));
    o += p.length;
  }
} else {
  const r = await sft((await expertSamples(text, data)).samples, 784);
  console.log(
    `stage 1: ${r.optimizerSteps} SFT steps, loss ${r.lastLoss.toFixed(3)} (${secs()} s)`,
  );
  const out = new Float32Array(specs.reduce((n, s) => n + model.parameters.get(s.name)!.length, 0));
  let o = 0;
  for (const s of specs) {
    out.set(model.parameters.get(s.name)!, o);
    o += model.parameters.get(s.name)!.length;
  }
  await Deno.mkdir(".bench-out", { recursive: true });
  await Deno.writeFile(base, new Uint8Array(out.buffer));
}

// Stage 2: skill-conditioned (or control) demonstrations.
const demos = await expertSamples(text, {
  ...data,
  skillShare: Number(a["skill-share"]),
  correctiveShare: Number(a["corrective-share"]),
});
const r = await sft(demos.samples, Number(a.steps));
console.log(
  `stage 2: ${demos.samples.length} samples (${demos.skilled} with their skill, ${demos.corrective} corrective), ${r.optimizerSteps} SFT steps, loss ${
    r.lastLoss.toFixed(3)
  } (${secs()} s)`,
);

let turn = 0;
const act = (s0: number) => async (prompts: string[]) =>
  (await text.generate(prompts, {
    maxNewTokens: 8,
    temperature: 1,
    seed: (s0 + 7919 * ++turn) >>> 0,
    stop: [ACTION_STOP],
  })).texts;

// Δ on 64 rollouts with the reference skill of each trajectory.
const tasks = await env.sampleTasks("train", 8, 555 + seed, envOptions);
const trajectories = await runRollouts({
  env,
  tasks,
  groupSize: 8,
  maxTurns: 20,
  historyLength: 0,
  policy: act(seed),
});
const samples = buildSamples(trajectories, {
  rewardSource: "success",
  invalidPenalty: 1,
  estimator: "gigpo",
  norm: "mean_std",
});
const skillOf = new Map<string, string>();
for (const t of trajectories) skillOf.set(t.id, (await env.referenceAnalysis(t)).episode_skill);
const plain = samples.map((s) => text.sample(s.prompt, s.response));
const old = await policy.score(plain);
const teacher = await policy.score(samples.map((s, i) => ({
  ...plain[i],
  prompt: text.promptIds(insertSkill(s.prompt, skillOf.get(s.trajectoryId)!)),
})));
const sum = { won: [0, 0], lost: [0, 0] };
const perSample: number[] = [], advantages: number[] = [];
samples.forEach((s, i) => {
  const gaps = teacher.logprobs[i].map((t, k) => t - old.logprobs[i][k]);
  const total = gaps.reduce((x, y) => x + y, 0);
  const b = s.won ? sum.won : sum.lost;
  b[0] += total;
  b[1] += gaps.length;
  perSample.push(total / gaps.length);
  advantages.push(s.advantage);
});
const mean = (v: number[]) => v.reduce((x, y) => x + y, 0) / v.length;
const mx = mean(perSample), my = mean(advantages);
const corr = mean(perSample.map((x, i) => (x - mx) * (advantages[i] - my))) /
  Math.sqrt(
    mean(perSample.map((x) => (x - mx) ** 2)) * mean(advantages.map((y) => (y - my) ** 2)),
  );
console.log(
  `Δ (nats per response token): won ${(sum.won[0] / sum.won[1]).toFixed(3)}, lost ${
    (sum.lost[0] / sum.lost[1]).toFixed(3)
  }; corr(Δ, A) ${corr.toFixed(3)}; rollouts won ${
    trajectories.filter((t) => t.won).length
  }/${trajectories.length}`,
);

// test_seen success, ordinary prompt vs the reference skill of an expert solve in the prompt.
async function expertSkill(task: Task): Promise<string> {
  const episode = env.createEpisode(task), expert = env.createExpert(task);
  let observation = await episode.reset();
  const steps = [];
  let won = false;
  for (let t = 1; t <= 20 && !won; t++) {
    const action = await expert.act(observation);
    const s = await episode.step(action);
    steps.push({ observation: observation.text, response: "", action, valid: s.valid, reward: 0 });
    observation = s.observation;
    won = s.won;
    if (s.done) break;
  }
  return (await env.referenceAnalysis({ task, steps, won, score: 0 })).episode_skill;
}
const evalTasks = await env.sampleTasks("test_seen", Number(a["eval-episodes"]), 99, envOptions);
const skills = new Map<string, string>();
for (const t of evalTasks) skills.set(t.id, await expertSkill(t));
const play = async (withSkill: boolean) => {
  turn = 0;
  const episodes = await runRollouts({
    env: withSkill
      ? {
        ...env,
        buildPrompt: async (input) =>
          insertSkill(await env.buildPrompt(input), skills.get(input.task.id)!),
      }
      : env,
    tasks: evalTasks,
    groupSize: 1,
    maxTurns: 20,
    historyLength: 0,
    policy: act(4242),
  });
  return episodes.filter((t) => t.won).length / episodes.length;
};
const [ordinary, skilled] = [await play(false), await play(true)];
console.log(
  `test_seen success: ordinary prompt ${(100 * ordinary).toFixed(0)}%, with the reference skill ${
    (100 * skilled).toFixed(0)
  }% (${evalTasks.length} episodes each; ${secs()} s)`,
);
await policy.release();
