/**
 * The warm-up stages of a job run (workers/seed/README.md, Algorithm, "Warm-up"), with progress and
 * events: `warmup_policy` (policy SFT on expert demonstrations), then `warmup_analyzer` (analyzer
 * SFT on the warmed policy's trajectories annotated by the reference analyzer or the LLM annotator
 * of `warmup.analyzer.annotator`, with the policy
 * demonstrations replayed), as the run plan lists them (../run_plan.ts: the analyzer stage for
 * `sft` jobs and `seed` jobs with analysis on; none with `warmup.skip`). Returns the step-0 metrics
 * of the warm-up.
 */
import { type JobSpec, maxTurnsOf } from "../../../jobs/mod.ts";
import type { AsyncEnvironment } from "../../envs/mod.ts";
import type { JobContext } from "../../worker/handler.ts";
import { Rng } from "../../model/mod.ts";
import { derivedSeed, SEED_USE } from "./seeds.ts";
import type { TextPolicy } from "../text_policy.ts";
import type { RunPlan } from "../run_plan.ts";
import type { Trajectory } from "../../envs/mod.ts";
import {
  annotateTrajectories,
  type AnnotationReport,
  AnnotatorError,
  probeAnnotator,
} from "../annotator.ts";
import { analyzerPromptOptions } from "../../skills/mod.ts";
import { evaluate } from "../evaluate.ts";
import { skillCheck } from "../warmup_skill_check.ts";
import {
  analyzerSamples,
  expertSamples,
  parseWarmupData,
  type SftOptions,
  type SftPhase,
  type SftReport,
  sftTrain,
  WarmupDataError,
} from "../warmup.ts";

/** What the warm-up needs from the run. */
export interface WarmupRun {
  ctx: JobContext;
  spec: JobSpec;
  /** Which warm-up stages run (`runPlan(spec).warmup`). */
  plan: RunPlan;
  env: AsyncEnvironment;
  theta: TextPolicy;
}

/**
 * Where a warm-up stage is, as the job's progress shows it beside `stage`: `phase: "trajectories"`
 * (the analyzer stage's rollouts of the warmed policy: `done` of `total` turns played, `episodes`
 * still playing) or `phase: "sft"` (`done` of `total` optimizer steps, `loss` the last step's
 * token-mean NLL in nats per token).
 */
export type StageProgress =
  | { phase: "trajectories"; unit: "turns"; done: number; total: number; episodes: number }
  | { phase: "sft"; unit: "steps"; done: number; total: number; loss?: number };

/**
 * Reports progress inside warm-up stage `stage`: the job's progress (`ctx.setProgress`, at most
 * one write per `everyMs` besides the first and last of a phase) and a `warmup_progress` event
 * (`{stage, ...StageProgress}`) at each tenth of a phase, so `seed follow` prints a line as it
 * advances, on a terminal or not.
 */
export function stageReporter(
  ctx: Pick<JobContext, "setProgress" | "emit">,
  stage: "warmup_policy" | "warmup_analyzer",
  totalSteps: number,
  everyMs = 2000,
): (p: StageProgress) => Promise<void> {
  let lastMs = -Infinity, phase = "", tenth = 0;
  return async (p) => {
    const now = Date.now();
    const first = p.phase !== phase;
    if (first) [phase, tenth] = [p.phase, 0];
    const reached = Math.floor((10 * p.done) / Math.max(1, p.total));
    const event = p.done > 0 && reached > tenth;
    if (event) tenth = reached;
    if (first || event || p.done === p.total || now - lastMs >= everyMs) {
      lastMs = now;
      await ctx.setProgress({ stage, step: 0, totalSteps, ...p });
    }
    if (event) await ctx.emit("warmup_progress", { stage, ...p });
  };
}

/** Runs the warm-up stages (see module doc); returns metrics named `warmup_<stage>_<what>`. */
export async function runWarmup(
  run: WarmupRun,
  totalSteps: number,
): Promise<Record<string, number>> {
  const { ctx, spec, plan, env, theta } = run;
  const out: Record<string, number> = {};
  if (!plan.warmup.includes("warmup_policy")) return out;
  const data = {
    env,
    envOptions: spec.env.options,
    maxTurns: maxTurnsOf(spec, env),
    historyLength: spec.env.history,
  };
  const stage = async (
    name: "warmup_policy" | "warmup_analyzer",
    cfg: JobSpec["warmup"]["analyzer"],
    phases: SftPhase[],
    seed: number,
    extra: Record<string, number>,
    sft: Pick<SftOptions, "lrSchedule" | "check"> = {},
  ): Promise<SftReport> => {
    const progress = stageReporter(ctx, name, totalSteps);
    const started = performance.now();
    const report = await sftTrain(theta, phases, {
      batchSize: cfg.batch_size,
      lr: cfg.lr,
      maxGradNorm: spec.optim.max_grad_norm,
      seed,
      signal: ctx.signal,
      onStart: (total) => progress({ phase: "sft", unit: "steps", done: 0, total }),
      onStep: (done, total, loss) => progress({ phase: "sft", unit: "steps", done, total, loss }),
      ...sft,
    });
    const seconds = (performance.now() - started) / 1000;
    const metrics = {
      samples: report.samples,
      optimizer_steps: report.optimizerSteps,
      first_loss: Number.isFinite(report.firstLoss) ? report.firstLoss : 0,
      last_loss: Number.isFinite(report.lastLoss) ? report.lastLoss : 0,
      seconds,
      ...extra,
    };
    for (const [k, v] of Object.entries(metrics)) out[`${name}_${k}`] = v;
    await ctx.emit("warmup", { stage: name, ...metrics });
    return report;
  };

  const user = await userData(run);
  const analyzer = plan.warmup.includes("warmup_analyzer");
  const annotating = analyzer && spec.warmup.analyzer.episodes > 0;
  // The annotator is checked (one request) before the policy warm-up, whose minutes a wrong URL,
  // key or model would otherwise waste: it is first called after it.
  const annotator = annotating ? await annotatorOf(run) : undefined;
  const policySeed = derivedSeed(spec.random_seed, SEED_USE.warmupPolicy);
  await ctx.setProgress({ stage: "warmup_policy", step: 0, totalSteps });
  const experts = await expertSamples(theta, {
    ...data,
    episodes: spec.warmup.policy.episodes,
    seed: policySeed,
    skillShare: spec.warmup.policy.skill_share,
    correctiveShare: spec.experimental.corrective_share,
  });
  const userPolicy = user.policy.map((x) => theta.sample(x.prompt, x.response));
  // The last `skill_epochs` passes on the skill-conditioned mix, the passes before on ordinary
  // prompts (user data in both).
  const { epochs, skill_epochs: skillEpochs = epochs } = spec.warmup.policy;
  const policyData = [...experts.samples, ...userPolicy];
  const policyPhases: SftPhase[] = [
    { samples: [...experts.ordinary, ...userPolicy], epochs: epochs - skillEpochs },
    { samples: policyData, epochs: skillEpochs },
  ];
  const checks = heldOutChecks(run);
  const policyReport = await stage("warmup_policy", spec.warmup.policy, policyPhases, policySeed, {
    episodes: spec.warmup.policy.episodes,
    expert_won: experts.won,
    skill_samples: experts.skilled,
    corrective_samples: experts.corrective,
    user_samples: user.policy.length,
  }, { lrSchedule: spec.warmup.policy.lr_schedule, check: checks.check });
  Object.assign(out, checks.metrics(policyReport));

  if (analyzer && (spec.warmup.analyzer.episodes > 0 || user.analyzer.length > 0)) {
    const analyzerSeed = derivedSeed(spec.random_seed, SEED_USE.warmupAnalyzer);
    const progress = stageReporter(ctx, "warmup_analyzer", totalSteps);
    const turns = { phase: "trajectories", unit: "turns", total: data.maxTurns } as const;
    const episodes = spec.warmup.analyzer.episodes;
    await progress({ ...turns, done: 0, episodes });
    const annotated = await analyzerSamples(theta, {
      ...data,
      episodes: spec.warmup.analyzer.episodes,
      seed: analyzerSeed,
      temperature: 1,
      maxNewTokens: spec.rollout.max_new_tokens,
      prompt: analyzerPromptOptions(spec.seed),
      signal: ctx.signal,
      label: annotator?.label,
      onTurn: ({ turn, live }) => progress({ ...turns, done: turn, episodes: live }),
    });
    // Policy demonstrations are replayed beside the analyses, with as many response tokens as
    // the analyses have (the SFT loss is a token mean, so this gives both halves equal weight):
    // trained on analyses alone, the small policy forgets how to act (measured: policy SFT undone
    // within 4 steps at lr 2e-3); one demonstration per analysis (~8 vs ~80 response tokens)
    // still took Sokoban eval success from 80% to 31% in 64 steps; replaying all demonstrations
    // made the analyses ~3% of the data and left the analyzer's parse rate at 0–0.3.
    const analyses = [
      ...annotated.samples,
      ...user.analyzer.map((x) => theta.sample(x.prompt, x.response, true)),
    ];
    const replay = replaySubset(policyData, replayCount(analyses, policyData), analyzerSeed);
    const analyzerData = [...analyses, ...replay];
    await stage(
      "warmup_analyzer",
      spec.warmup.analyzer,
      [{ samples: analyzerData, epochs: spec.warmup.analyzer.epochs }],
      analyzerSeed,
      {
        episodes: spec.warmup.analyzer.episodes,
        policy_won: annotated.won,
        analyses: annotated.samples.length,
        user_samples: user.analyzer.length,
        ...annotator?.metrics(),
      },
    );
  }
  if (spec.warmup.policy.check_episodes > 0) Object.assign(out, await warmupSkillCheck(run));
  return out;
}

/**
 * The held-out success checks of the policy stage (`warmup.policy.check_every`,
 * `check_episodes`, `target_success`): every `check_every` optimizer steps the policy plays the
 * same `check_episodes` train tasks (their own seed, never drawn by rollouts) once each at the
 * rollout temperature; each check is a `warmup_check` event, and the stage stops at the first
 * check at or above `target_success`. `metrics` gives `warmup_policy_checks`,
 * `warmup_policy_check_success` (the last check's) and `warmup_policy_stopped_at_target` (0/1).
 */
function heldOutChecks(run: WarmupRun) {
  const { ctx, spec, env, theta } = run;
  const cfg = spec.warmup.policy;
  let checks = 0, last = NaN;
  const seed = derivedSeed(spec.random_seed, SEED_USE.warmupCheck);
  const check = cfg.check_every > 0 && cfg.check_episodes > 0
    ? {
      every: cfg.check_every,
      run: async (done: number, total: number) => {
        const { splits } = await evaluate(theta, {
          env,
          envOptions: spec.env.options,
          splits: ["train"],
          episodes: cfg.check_episodes,
          temperature: spec.rollout.temperature,
          maxTurns: maxTurnsOf(spec, env),
          historyLength: spec.env.history,
          maxNewTokens: spec.rollout.max_new_tokens,
          seed,
          signal: ctx.signal,
        });
        checks++;
        last = splits[0].success_rate;
        const reached = cfg.target_success !== undefined && last >= cfg.target_success;
        await ctx.emit("warmup_check", {
          stage: "warmup_policy",
          done,
          total,
          success: last,
          episodes: splits[0].episodes,
          ...(cfg.target_success !== undefined ? { target: cfg.target_success } : {}),
          reached,
        });
        return reached;
      },
    }
    : undefined;
  return {
    check,
    metrics: (report: SftReport): Record<string, number> =>
      checks === 0 ? {} : {
        warmup_policy_checks: checks,
        warmup_policy_check_success: last,
        warmup_policy_stopped_at_target: report.stoppedEarly ? 1 : 0,
      },
  };
}

/**
 * The skill check after the warm-up (../warmup_skill_check.ts) on `warmup.policy.check_episodes`
 * tasks: a `warmup_skill_check` event and the metrics `warmup_skill_check_success`,
 * `…_success_with_skill`, `…_delta_lost` (nats per token), `…_lost_scored`, `…_lost_tokens` and
 * `…_seconds`.
 */
async function warmupSkillCheck(run: WarmupRun): Promise<Record<string, number>> {
  const { ctx, spec, env, theta } = run;
  const started = performance.now();
  const r = await skillCheck(theta, {
    env,
    envOptions: spec.env.options,
    episodes: spec.warmup.policy.check_episodes,
    temperature: spec.rollout.temperature,
    maxTurns: maxTurnsOf(spec, env),
    historyLength: spec.env.history,
    maxNewTokens: spec.rollout.max_new_tokens,
    seed: derivedSeed(spec.random_seed, SEED_USE.skillCheck),
    signal: ctx.signal,
  });
  const metrics = {
    episodes: r.episodes,
    success: r.success,
    success_with_skill: r.successWithSkill,
    delta_lost: r.deltaLost,
    lost_scored: r.lostScored,
    lost_tokens: r.lostTokens,
    seconds: (performance.now() - started) / 1000,
  };
  await ctx.emit("warmup_skill_check", metrics);
  return Object.fromEntries(
    Object.entries(metrics).map(([k, v]) => [`warmup_skill_check_${k}`, v]),
  );
}

/**
 * How many policy demonstrations to replay beside `analyses` so that their response tokens match
 * the analyses' (at least one per analysis; 0 when either side is empty), from the mean response
 * length of `demonstrations`.
 */
export function replayCount(
  analyses: readonly { response: readonly number[] }[],
  demonstrations: readonly { response: readonly number[] }[],
): number {
  if (analyses.length === 0 || demonstrations.length === 0) return 0;
  const tokens = (xs: readonly { response: readonly number[] }[]) =>
    xs.reduce((n, x) => n + x.response.length, 0);
  const mean = Math.max(1, tokens(demonstrations) / demonstrations.length);
  return Math.max(analyses.length, Math.ceil(tokens(analyses) / mean));
}

/**
 * `count` samples of `data` drawn without replacement (all of them when `count ≥ data.length`), in
 * a seeded order: the policy demonstrations replayed during the analyzer stage.
 */
export function replaySubset<T>(data: readonly T[], count: number, seed: number): T[] {
  if (count >= data.length) return [...data];
  const rng = new Rng(seed);
  const pool = [...data];
  for (let i = 0; i < count; i++) {
    const j = i + rng.nextInt(pool.length - i);
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  return pool.slice(0, count);
}

/**
 * The LLM annotator of `warmup.analyzer.annotator` (annotator.ts), or undefined when the spec
 * names none: `label` labels trajectories with it (logging the counts), `metrics` reports
 * `annotator_requests`, `annotator_answered`, `annotator_parsed`, `annotator_failed` and
 * `annotator_parse_rate` (parsed / answered) after it ran. It is probed first (annotator.ts
 * `probeAnnotator`: one request).
 * @throws AnnotatorError when the credential secret is missing (deleted after submit), or the
 *   endpoint does not answer the probe (refused URL, connection error, HTTP error).
 */
async function annotatorOf(run: WarmupRun) {
  const spec = run.spec.warmup.analyzer.annotator;
  if (!spec) return undefined;
  const { ctx } = run;
  const apiKey = ctx.secret ? await ctx.secret(spec.credential_secret) : null;
  if (apiKey === null) {
    throw new AnnotatorError(
      `Cannot label the analyzer warm-up data as warmup.analyzer.annotator.credential_secret must name a secret of this tenant: ${spec.credential_secret} is missing`,
    );
  }
  await probeAnnotator({ spec, apiKey, signal: ctx.signal });
  ctx.log.info("annotator answered", { model: spec.model });
  let report: AnnotationReport | undefined;
  return {
    label: async (trajectories: Trajectory[]) => {
      const annotation = await annotateTrajectories(trajectories, {
        spec,
        apiKey,
        prompt: analyzerPromptOptions(run.spec.seed),
        signal: ctx.signal,
      });
      report = annotation.report;
      ctx.log.info("annotated", { ...report });
      return annotation.labels;
    },
    metrics: (): Record<string, number> =>
      report
        ? {
          annotator_requests: report.requests,
          annotator_answered: report.answered,
          annotator_parsed: report.parsed,
          annotator_failed: report.failed,
          annotator_parse_rate: report.parseRate,
        }
        : {},
  };
}

/** `warmup.data` (an `s3://bucket/key` JSONL object read through the tenant's artifact reader). */
async function userData(run: WarmupRun) {
  const uri = run.spec.warmup.data;
  if (!uri) return { policy: [], analyzer: [] };
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri)!;
  const bytes = await run.ctx.artifacts.readObject(m[1], m[2]);
  if (!bytes) {
    throw new WarmupDataError(`Cannot use warmup.data as ${uri} must exist: it is missing`);
  }
  return parseWarmupData(bytes);
}
