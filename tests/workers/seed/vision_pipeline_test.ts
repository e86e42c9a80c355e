/**
 * The SEED pipeline on image observations, stage by stage: model resolution and the start-up
 * check, rollouts keeping each turn's image, samples, teacher and analyzer prompts, expert
 * demonstrations, and one trainer step whose score and update calls see the images.
 */
import assert from "node:assert/strict";
import { JobSpecSchema, parseJobSpec } from "../../../jobs/mod.ts";
import {
  type AsyncEnvironment,
  getEnvironment,
  IMAGE_PLACEHOLDER,
  toAsyncEnvironment,
} from "../../../workers/envs/mod.ts";
import {
  type AnyObjective,
  Policy,
  type Sample,
  type ScalarName,
  TOKEN_NLL,
  Tokenizer,
  type TrainSample,
} from "../../../workers/model/mod.ts";
import {
  buildSamples,
  expertSamples,
  type ObservationImage,
  runRollouts,
  TextPolicy,
} from "../../../workers/seed/mod.ts";
import { buildAnalyzerPrompt, SKILL_HEADING, teacherPrompts } from "../../../workers/skills/mod.ts";
import {
  builtinImageSize,
  checkModelFitsEnv,
  ModelSourceError,
  probeFirstTurn,
  resolveModel,
} from "../../../workers/seed/run/mod.ts";
import { FixedAnalyzer, testTrainer, tinySpec } from "./_jobs.ts";

const SOKOBAN_IMAGE = { render: "image" };
const sokoban = () => toAsyncEnvironment(getEnvironment("sokoban"));
const ezpoints = () => toAsyncEnvironment(getEnvironment("ezpoints"));

async function tinyVl(env: AsyncEnvironment, options: Record<string, unknown>) {
  const first = await probeFirstTurn(env, options);
  const model = await resolveModel("builtin:tiny-vl", {
    env,
    seed: 1,
    artifacts: null as never,
    images: first.images,
  });
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  return { model, first, theta: new TextPolicy(policy, new Tokenizer(model.tokenizer)) };
}

/** The observation images of replaying `actions` on a fresh episode of `task` (before each). */
async function replayImages(
  env: AsyncEnvironment,
  task: Parameters<AsyncEnvironment["createEpisode"]>[0],
  actions: string[],
) {
  const episode = env.createEpisode(task);
  const images: (ObservationImage | undefined)[] = [(await episode.reset()).image];
  for (const a of actions.slice(0, -1)) images.push((await episode.step(a)).observation.image);
  await episode.close();
  return images;
}

Deno.test("the job spec accepts builtin:tiny-vl as a model base", () => {
  const base = (b: string) =>
    JobSpecSchema.safeParse({ env: { id: "ezpoints" }, model: { base: b } }).success;
  assert.ok(base("builtin:tiny-vl"));
  assert.ok(base("builtin:tiny"));
  assert.ok(!base("builtin:tiny-v"));
});

Deno.test("builtin:tiny-vl reads <image> as one token and sizes its encoder to the env's images", async () => {
  const ez = await tinyVl(ezpoints(), {});
  assert.equal(ez.first.images.length, 1);
  assert.equal(ez.model.config.vision_config?.image_size, 80, "104×72 cards: capped at 80");
  const ids = ez.theta.tokenizer.encode(IMAGE_PLACEHOLDER, { addSpecialTokens: false });
  assert.deepEqual(ids, [ez.model.config.image_token_id]);
  const prompt = ez.theta.promptIds(ez.first.prompt);
  assert.equal(prompt.filter((t) => t === ez.model.config.image_token_id).length, 1);
  const sk = await tinyVl(sokoban(), SOKOBAN_IMAGE);
  assert.equal(sk.model.config.vision_config?.image_size, 48, "6×6 room of 8-pixel tiles");
  // The same vocabulary as builtin:tiny, plus the one special token.
  const tiny = await resolveModel("builtin:tiny", {
    env: sokoban(),
    seed: 1,
    artifacts: null as never,
  });
  assert.equal(sk.model.config.vocab_size, tiny.config.vocab_size + 1);
  assert.equal(builtinImageSize([]), 48);
  assert.equal(builtinImageSize([{ width: 20, height: 9, rgb: new Uint8Array(540) }]), 24);
  await Promise.all([ez.theta.policy.release(), sk.theta.policy.release()]);
});

Deno.test("a text-only model on an image environment is refused, naming builtin:tiny-vl", async () => {
  const tiny = await resolveModel("builtin:tiny", {
    env: ezpoints(),
    seed: 1,
    artifacts: null as never,
  });
  const names = { base: "builtin:tiny", envId: "ezpoints" };
  const image = await probeFirstTurn(ezpoints(), {});
  assert.throws(
    () => checkModelFitsEnv(tiny.config, names, image),
    (e) =>
      e instanceof ModelSourceError && /builtin:tiny-vl/.test(e.message) && /image/.test(e.message),
  );
  // The text render of the same env, and a vision model on a text env, are fine.
  checkModelFitsEnv(tiny.config, names, await probeFirstTurn(ezpoints(), { render: "text" }));
  const vl = await tinyVl(sokoban(), {});
  assert.equal(vl.first.images.length, 0);
  checkModelFitsEnv(vl.model.config, { base: "builtin:tiny-vl", envId: "sokoban" }, vl.first);
  await vl.theta.policy.release();
});

Deno.test("rollout turns keep the image their prompt shows and the policy receives it", async () => {
  const env = sokoban();
  const tasks = await env.sampleTasks("train", 2, 3, SOKOBAN_IMAGE);
  const moves = ["down", "left", "up", "right"];
  const seen: ObservationImage[][][] = [];
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 1,
    maxTurns: 3,
    historyLength: 1,
    policy: (prompts, images) => {
      seen.push(images);
      return Promise.resolve(
        prompts.map((_, i) => `<action>${moves[(seen.length + i) % 4]}</action>`),
      );
    },
  });
  for (const [b, t] of trajectories.entries()) {
    const actions = t.steps.map((s) => s.action);
    const replay = await replayImages(env, t.task, actions);
    t.steps.forEach((s, k) => {
      assert.equal(s.prompt.split(IMAGE_PLACEHOLDER).length - 1, 1, "one placeholder per prompt");
      assert.equal(s.images?.length, 1);
      assert.deepEqual(s.images![0], replay[k], `trajectory ${b} turn ${k + 1}`);
      assert.equal(seen[k][b][0], s.images![0], "the policy got the same image");
      assert.ok(s.observation.includes("#"), "the observation text stays the grid");
    });
  }
  const text = await runRollouts({
    env,
    tasks: await env.sampleTasks("train", 1, 3, {}),
    groupSize: 1,
    maxTurns: 2,
    historyLength: 0,
    policy: (prompts, images) => {
      assert.deepEqual(images, prompts.map(() => []));
      return Promise.resolve(prompts.map(() => "<action>up</action>"));
    },
  });
  assert.ok(text[0].steps.every((s) => !("images" in s)), "text turns are unchanged");
});

Deno.test("samples and teacher prompts keep the image; the analyzer prompt is text only", async () => {
  const env = sokoban();
  const tasks = await env.sampleTasks("train", 1, 4, SOKOBAN_IMAGE);
  const trajectories = await runRollouts({
    env,
    tasks,
    groupSize: 2,
    maxTurns: 3,
    historyLength: 2,
    policy: (prompts) => Promise.resolve(prompts.map(() => "<action>left</action>")),
  });
  const samples = buildSamples(trajectories, {
    rewardSource: "success",
    invalidPenalty: 0.1,
    estimator: "grpo",
    norm: "mean_std",
  });
  assert.equal(samples.length, 6);
  samples.forEach((s, i) => {
    const step = trajectories[Math.floor(i / 3)].steps[i % 3];
    assert.equal(s.images, step.images);
  });
  const skills = new Map(trajectories.map((t) => [t.id, "walk behind the box first"]));
  for (const teacher of teacherPrompts(samples, skills)) {
    assert.equal(teacher!.split(IMAGE_PLACEHOLDER).length - 1, 1);
    const lines = teacher!.split("\n");
    const task = lines.findIndex((l) => l.startsWith("Your task is to: "));
    assert.deepEqual(lines.slice(task + 1, task + 3), ["", SKILL_HEADING]);
  }
  const analyzer = buildAnalyzerPrompt(trajectories[0], { maxSteps: 3 });
  assert.ok(!analyzer.includes(IMAGE_PLACEHOLDER), analyzer);
  assert.ok(analyzer.includes(trajectories[0].steps[0].observation.split("\n")[2]), "the grid");
});

Deno.test("expert demonstrations on image environments carry one image per prompt", async () => {
  for (const [env, options] of [[sokoban(), SOKOBAN_IMAGE], [ezpoints(), {}]] as const) {
    const { theta, model } = await tinyVl(env, options);
    const { samples, won } = await expertSamples(theta, {
      env,
      envOptions: options,
      episodes: 2,
      maxTurns: 20,
      historyLength: 1,
      seed: 2,
    });
    assert.equal(won, 2);
    assert.ok(samples.length >= 2);
    for (const s of samples) {
      assert.equal(s.images?.length, 1);
      assert.equal(s.prompt.filter((t) => t === model.config.image_token_id).length, 1);
    }
    // The images are the policy's input: the SFT loss runs on them.
    const r = await theta.policy.trainStep(TOKEN_NLL, samples);
    assert.ok(Number.isFinite(r.outputs.loss) && r.outputs.loss > 0);
    const vision = [...r.grads].filter(([k]) => k.startsWith("vision_tower."));
    assert.ok(vision.some(([, g]) => g.some((x) => x !== 0)), "the encoder gets a gradient");
    await theta.policy.release();
  }
});

/** A policy that records the samples of every score and train call. */
class RecordingPolicy extends Policy {
  scored: Sample[][] = [];
  trained: TrainSample[][] = [];
  override score(input: Sample[]) {
    this.scored.push(input);
    return super.score(input);
  }
  override trainStep<X extends AnyObjective>(
    objective: X,
    input: TrainSample[],
    scalars?: Readonly<Record<ScalarName<X>, number>>,
  ) {
    this.trained.push(input);
    return super.trainStep(objective, input, scalars);
  }
}

Deno.test("a SEED step on images re-scores with the skill and the image, and updates on images", async () => {
  const spec = parseJobSpec(
    // No analyzer replay: every recorded update row is then a turn sample.
    tinySpec({
      env: { id: "ezpoints", max_turns: 3, history: 1 },
      seed: { opd_coef: 1 },
    }),
  );
  const env = ezpoints();
  const first = await probeFirstTurn(env, {});
  const model = await resolveModel("builtin:tiny-vl", {
    env,
    seed: 1,
    artifacts: null as never,
    images: first.images,
  });
  const policy = new RecordingPolicy(model.config, model.parameters, { threads: 1 });
  const theta = new FixedAnalyzer(policy, new Tokenizer(model.tokenizer));
  const trainer = testTrainer(spec, { env, theta });
  const { metrics, trajectories } = await trainer.step(1, () => Promise.resolve());
  const imageId = model.config.image_token_id!;
  const images = (s: Sample) => s.prompt.filter((t) => t === imageId).length;
  // Scores: ℓ_old over the ordinary prompts, then ℓ_T over the skill prompts.
  assert.equal(policy.scored.length, 2);
  const [plain, teacher] = policy.scored;
  assert.equal(plain.length, metrics.samples);
  assert.equal(teacher.length, metrics.teacher_samples);
  assert.equal(metrics.teacher_samples, metrics.samples);
  const heading = theta.responseIds(SKILL_HEADING);
  for (const [i, s] of teacher.entries()) {
    assert.equal(s.images?.length, 1);
    assert.equal(images(s), 1);
    assert.equal(s.images![0], plain[i].images![0], "the teacher sees the same image");
    assert.ok(s.prompt.length > plain[i].prompt.length + heading.length, "the skill is inserted");
  }
  const turns = trajectories.flatMap((t) => t.steps);
  plain.forEach((s, i) => assert.equal(s.images![0], turns[i].images![0]));
  const updated = policy.trained.flat();
  assert.equal(updated.length, metrics.samples);
  assert.ok(updated.every((s) => s.images?.length === 1 && s.inputs?.opd_mask === 1));
  for (const p of theta.analyzerPrompts) assert.ok(!p.includes(IMAGE_PLACEHOLDER), p);
  assert.ok(theta.analyzerPrompts.every((p) => p.includes("Cards: ")), "observation descriptions");
  assert.ok(Number.isFinite(metrics.opd_loss) && metrics.opd_loss !== 0);
  await policy.release();
});
