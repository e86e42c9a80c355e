/**
 * The job handler of methods `seed`, `grpo` and `sft` (jobs/README.md, "Data flow of one job", step
 * 3): sets the job up (environment, model from `model.base`, or the latest checkpoint when
 * resuming), warms up (policy SFT, then analyzer SFT for `seed` with analysis on and for `sft`),
 * evaluates the warm-up model as step 0, then runs `steps` updates with evaluation every
 * `eval_every` and checkpoints every `checkpoint_every` (and at the end).
 *
 * Before anything else the environment's first turn is probed: a job whose prompts show images
 * on a model without an image encoder fails at once (`checkModelFitsEnv`).
 *
 * Per step the order is: update → evaluation (when due) → one `ctx.commitStep(step)` holding
 * everything the step produced: metrics, the rollout and eval trajectory dumps, the checkpoint
 * and skill library (when due) and the `eval`, `step` and `checkpoint` events that announce them
 * — visible together or not at all. A run that dies before a checkpointed commit repeats the
 * steps since the previous checkpoint with the same draws, and their rows are replaced (not
 * duplicated). A resumed run first re-commits what its checkpoint's step lacks (a skill library
 * or `checkpoint` event lost by a run that wrote them one by one). Cancel (`ctx.signal`, or the
 * worker killing the compute process) is checked between phases and between rollout turns;
 * draining finishes the current step, checkpoints it and returns `"drained"`.
 *
 * LoRA (`model.lora`): a fresh adapter (PEFT's init, seeded by `random_seed`) joins the base
 * weights in the policy's parameter map; warm-up and updates train only the adapter (the
 * optimizer holds only its tensors); π_ref is the base with the adapter off, a policy over the
 * same map without the adapter (no copy of the weights); checkpoints hold the adapter as a PEFT
 * folder (checkpoint.ts), and a resumed run resolves `model.base` again and reads the adapter
 * onto it.
 */
import { type JobProgress, type JobSpec, maxTurnsOf, METHODS } from "../../../jobs/mod.ts";
import { type AsyncEnvironment, resolveEnvironment } from "../../envs/mod.ts";
import type { EngineOptions } from "../../engine/mod.ts";
import {
  AdamW,
  declaredEosTokenIds,
  type HfModel,
  initLoraParameters,
  type LoraConfig,
  type Parameters,
  Policy,
  Rng,
  Tokenizer,
} from "../../model/mod.ts";
import {
  defaultRegistry,
  type HandlerOutcome,
  type HandlerRegistry,
  type JobContext,
  type JobHandler,
  type ResumePoint,
} from "../../worker/handler.ts";
import {
  adapterBase,
  type CheckpointAdapter,
  CheckpointError,
  checkpointFiles,
  readCheckpoint,
  type TrainerState,
} from "./checkpoint.ts";
import { evalMetrics, evaluate } from "../evaluate.ts";
import { checkModelFitsEnv, pinModelBase, probeFirstTurn, resolveModel } from "./model_source.ts";
import { SIGNAL_METRIC_NAMES } from "../signal_metrics.ts";
import { checkAnalyzerBudget, skillChooser, SkillLibrary } from "../../skills/mod.ts";
import { DEFAULT_DUMP_LIMITS, evalDump, rolloutDump } from "./trajectory_dump.ts";
import { TextPolicy } from "../text_policy.ts";
import { SeedTrainer } from "../trainer.ts";
import { type RunPlan, runPlan } from "../run_plan.ts";
import { STEP_EVENT_METRICS } from "../metrics.ts";
import { runWarmup } from "./warmup_stage.ts";
import { UpdateEta } from "./update_eta.ts";
import { SeedOptionError } from "../errors.ts";
import { policyPublisher } from "./publish_policy.ts";
import { RemoteRolloutEngine } from "../remote_rollout.ts";
import { derivedSeed, SEED_USE } from "./seeds.ts";

/** Options of {@link createSeedHandler}. */
export interface SeedHandlerOptions {
  /** onnxruntime settings (default: the worker's execution provider, 2 threads). */
  engine?: EngineOptions;
  /**
   * Most bytes of prompt-prefix KV the teacher pass holds at once (the worker's
   * `WORKER_PREFIX_CACHE_MB`; default `PREFIX_CACHE_BYTES` of workers/model/policy.ts).
   */
  prefixCacheBytes?: number;
}

/** What a run holds while it trains. */
interface RunState {
  ctx: JobContext;
  spec: JobSpec;
  plan: RunPlan;
  env: AsyncEnvironment;
  model: HfModel;
  /**
   * The base model reference the run resolved: `model.base`, except that a LoRA job pins a
   * `job:<id>` to its step then (`pinModelBase`) and a resumed LoRA run takes it from its
   * checkpoint's adapter config.
   */
  baseName: string;
  theta: TextPolicy;
  reference: Policy | null;
  referenceStep: number | null;
  optimizer: AdamW;
  rng: Rng;
  library: SkillLibrary;
  step: number;
  /** The clock of this run's updates, for the ETA in the job's progress. */
  updates: UpdateEta;
}

const copyParams = (p: Parameters): Parameters => new Map([...p].map(([k, v]) => [k, v.slice()]));

/** The job's LoRA adapter settings (`model.lora`), or undefined for full fine-tuning. */
export function loraOf(spec: JobSpec): LoraConfig | undefined {
  const l = spec.model.lora;
  return l &&
    { rank: l.rank, alpha: l.alpha, dropout: l.dropout, target_modules: l.target_modules };
}

/**
 * How a LoRA job's checkpoints hold its adapter on `baseName` (undefined for full fine-tuning):
 * PEFT is given the base's own name — the name an uploaded model was given at upload, else its
 * config's `_name_or_path` — and the service's reference (`baseName`) is kept in the adapter
 * weights' metadata (lora.ts `ADAPTER_BASE_METADATA`).
 */
function checkpointAdapter(
  spec: JobSpec,
  baseName: string,
  model: HfModel,
): CheckpointAdapter | undefined {
  const lora = loraOf(spec);
  const fromConfig = model.sourceConfig?._name_or_path;
  const own = model.name ?? (typeof fromConfig === "string" ? fromConfig : "");
  return lora && {
    lora,
    baseModel: baseName,
    baseName: own !== "" ? own : baseName,
    saveMerged: spec.model.lora?.save_merged ?? false,
  };
}

/** The handler (see module doc). */
export function createSeedHandler(options: SeedHandlerOptions = {}): JobHandler {
  return async (ctx: JobContext): Promise<HandlerOutcome> => {
    const run = await setUp(ctx, options);
    try {
      return await train(run, options);
    } finally {
      await run.reference?.release();
      await run.theta.policy.release();
    }
  };
}

/**
 * The entry a compute process calls (workers/worker/compute.ts): the handler with `options`.
 * The worker runs it in a child process of its own, so its long onnxruntime calls never hold up the
 * heartbeats and cancels of the worker's control loop.
 */
export function createHandler(options: SeedHandlerOptions = {}): JobHandler {
  return createSeedHandler(options);
}

/**
 * Registers the handler for every JobSpec method (`seed`, `grpo`, `gigpo`, `sft`) (default: the
 * worker's registry), to run in a compute process; `options` must be plain data (it is copied into
 * the child).
 */
export function registerSeedHandlers(
  registry: HandlerRegistry = defaultRegistry,
  options: SeedHandlerOptions = {},
): void {
  const module = new URL(import.meta.url);
  for (const method of METHODS) registry.register(method, { module, options });
}

async function setUp(ctx: JobContext, options: SeedHandlerOptions): Promise<RunState> {
  const spec = ctx.spec;
  const env = await resolveEnvironment(spec.env.id);
  const firstTurn = await probeFirstTurn(env, spec.env.options);
  const names = { base: spec.model.base, envId: spec.env.id };
  const resume = await ctx.latestCheckpoint();
  const lora = loraOf(spec);
  // The worker's provider unless the registration pins one (float32 graphs either way).
  const engine = { threads: 2, ep: ctx.executionProvider ?? "cpu", ...options.engine, lora };
  const baseModel = (name: string) =>
    resolveModel(name, {
      env,
      seed: derivedSeed(spec.random_seed, SEED_USE.init),
      artifacts: ctx.artifacts,
      images: firstTurn.images,
    });
  if (resume) {
    const baseName = lora ? await adapterBase(resume) : spec.model.base;
    const restored = await readCheckpoint(
      resume,
      lora && { config: lora, base: await baseModel(baseName) },
    );
    checkModelFitsEnv(restored.model.config, names, firstTurn);
    const state = restored.state;
    if (!state) {
      throw new CheckpointError(
        `Cannot resume from checkpoint ${resume.step} as it must hold trainer_state.json`,
      );
    }
    // Fresh buffers (not views into the file bytes), as in an uninterrupted run (a LoRA run's
    // base is resolved as a fresh run's is, and its adapter tensors are copies).
    if (!lora) restored.model.parameters = copyParams(restored.model.parameters);
    const policy = new Policy(restored.model.config, restored.model.parameters, engine);
    const theta = new TextPolicy(policy, new Tokenizer(restored.model.tokenizer), {
      eosTokenIds: declaredEosTokenIds(restored.model),
    });
    checkAnalyzerBudget(spec, { plan: runPlan(spec), theta, env });
    const optimizer = newOptimizer(spec, policy);
    if (restored.optimizer) optimizer.load(restored.optimizer);
    let reference: Policy | null = null;
    if (state.reference_step !== null) {
      reference = lora ? baseReference(policy) : new Policy(
        restored.model.config,
        state.reference_step === resume.step ? copyParams(restored.model.parameters) : copyParams(
          (await readCheckpoint(await mustHave(ctx, state.reference_step))).model.parameters,
        ),
        { sessions: policy.sessions },
      );
    }
    ctx.log.info("resuming", { step: state.step });
    await ctx.emit("resumed", { step: state.step, attempt: ctx.attempt });
    await repairStep(ctx, resume, state);
    return {
      ctx,
      spec,
      plan: runPlan(spec),
      env,
      model: restored.model,
      baseName,
      theta,
      reference,
      referenceStep: state.reference_step,
      optimizer,
      rng: Rng.fromState(state.rng),
      library: SkillLibrary.fromJSON(state.skill_library),
      step: state.step,
      updates: new UpdateEta(spec.eval_every),
    };
  }
  const baseName = lora ? await pinModelBase(spec.model.base, ctx.artifacts) : spec.model.base;
  const model = await baseModel(baseName);
  checkModelFitsEnv(model.config, names, firstTurn);
  if (lora) {
    const seed = derivedSeed(spec.random_seed, SEED_USE.lora);
    for (const [name, t] of initLoraParameters(model.config, lora, seed)) {
      model.parameters.set(name, t);
    }
  }
  const policy = new Policy(model.config, model.parameters, engine);
  const theta = new TextPolicy(policy, new Tokenizer(model.tokenizer), {
    eosTokenIds: declaredEosTokenIds(model),
  });
  checkAnalyzerBudget(spec, { plan: runPlan(spec), theta, env });
  return {
    ctx,
    spec,
    plan: runPlan(spec),
    env,
    model,
    baseName,
    theta,
    reference: null,
    referenceStep: null,
    optimizer: newOptimizer(spec, policy),
    rng: new Rng(derivedSeed(spec.random_seed, SEED_USE.trainer)),
    library: new SkillLibrary(ctx.jobId),
    step: -1,
    updates: new UpdateEta(spec.eval_every),
  };
}

async function mustHave(ctx: JobContext, step: number) {
  const point = await ctx.checkpointAt(step);
  if (!point) {
    throw new CheckpointError(
      `Cannot resume as the reference checkpoint (step ${step}) must exist: it is missing`,
    );
  }
  return point;
}

/** AdamW over the policy's trainable tensors (the adapter's only, for a LoRA job). */
function newOptimizer(spec: JobSpec, policy: Policy): AdamW {
  return new AdamW(policy.trainableSpecs(), {
    lr: spec.optim.lr,
    weightDecay: spec.optim.weight_decay,
  });
}

/** π_ref of a LoRA job: the base with the adapter off, over θ's own parameter map (no copy). */
function baseReference(theta: Policy): Policy {
  return new Policy(theta.config, theta.params, { sessions: theta.sessions });
}

async function train(run: RunState, options: SeedHandlerOptions): Promise<HandlerOutcome> {
  const { ctx, spec, plan } = run;
  const total = plan.steps;
  if (run.step < 0) {
    const warm = await runWarmup(run, total);
    if (plan.reference) {
      run.reference = spec.model.lora
        ? baseReference(run.theta.policy)
        : new Policy(run.model.config, copyParams(run.model.parameters), {
          sessions: run.theta.policy.sessions,
        });
      run.referenceStep = 0;
    }
    run.step = 0;
    const evals = await evaluateNow(run, 0, total);
    const parts = await checkpointParts(run, 0, total);
    await ctx.commitStep(0, {
      metrics: { ...warm, ...evals.metrics },
      trajectories: evals.dump ? [evals.dump] : [],
      ...parts,
      events: [...evals.events, checkpointEvent(0, parts.checkpoint)],
    });
    if (ctx.draining && total > 0) return "drained";
  }
  const trainer = new SeedTrainer({
    spec,
    plan,
    env: run.env,
    theta: run.theta,
    reference: run.reference,
    optimizer: run.optimizer,
    rng: run.rng,
    library: run.library,
    remote: await remoteEngine(run),
    prefixCacheBytes: options.prefixCacheBytes,
  });
  for (let step = run.step + 1; step <= total; step++) {
    ctx.signal.throwIfAborted();
    const done = step - 1;
    run.updates.start(step, Date.now());
    const { metrics, trajectories, teacher } = await trainer.step(
      step,
      (stage) => ctx.setProgress(progressOf(run, stage, done, total)),
      ctx.signal,
    );
    const dumps = ctx.saveTrajectories
      ? [rolloutDump(ctx.jobId, step, trajectories, DEFAULT_DUMP_LIMITS, {
        ...teacher,
        decode: (ids) => run.theta.tokenizer.decode(ids),
      })]
      : [];
    const events: { type: string; data: Record<string, unknown> }[] = [];
    const due = (every: number) => every > 0 && step % every === 0;
    if (due(spec.eval_every) || step === total) {
      const evals = await evaluateNow(run, step, total);
      Object.assign(metrics, evals.metrics);
      metrics.seconds_eval = evals.metrics.seconds_eval;
      if (evals.dump) dumps.push(evals.dump);
      events.push(...evals.events);
    } else {
      // No evaluation ran: no `seconds_eval` (the trainer's phase timer says 0), as no eval rates.
      delete metrics.seconds_eval;
    }
    events.push({ type: "step", data: summary(step, total, metrics) });
    run.step = step;
    const checkpointed = due(spec.checkpoint_every) || step === total || ctx.draining;
    const parts = checkpointed ? await checkpointParts(run, step, total) : undefined;
    await ctx.commitStep(step, {
      metrics,
      trajectories: dumps,
      ...parts,
      events: parts ? [...events, checkpointEvent(step, parts.checkpoint)] : events,
    });
    run.updates.finish(Date.now());
    if (ctx.draining && step < total) return "drained";
  }
  await ctx.setProgress({ stage: "done", step: total, totalSteps: total, etaS: 0 });
  return "succeeded";
}

/**
 * The remote rollout engine of `rollout.engine` (workers/seed/README.md, "Remote rollout
 * engines"), or undefined for the local decode. Keys are read from the tenant's secrets.
 * @throws SeedOptionError naming the endpoint's `api_key_secret` when the tenant lacks it, or when
 *   the context cannot publish policies; OutboundUrlError for a refused `base_url`.
 */
async function remoteEngine(run: RunState) {
  const { ctx, spec } = run;
  const engine = spec.rollout.engine;
  if (engine === "local") return undefined;
  if (!ctx.publishRolloutPolicy) {
    throw new SeedOptionError(
      "Cannot use rollout.engine endpoints as this worker must be able to publish the policy to the object store: it cannot",
      { option: "rollout.engine", value: "endpoints" },
    );
  }
  const endpoints = [];
  for (const [i, e] of engine.endpoints.entries()) {
    const apiKey = e.api_key_secret ? await ctx.secret?.(e.api_key_secret) : null;
    if (e.api_key_secret && !apiKey) {
      throw new SeedOptionError(
        `Cannot use rollout.engine.endpoints[${i}] as its api_key_secret must name a secret of this tenant: ${e.api_key_secret} is missing`,
        { option: `rollout.engine.endpoints[${i}].api_key_secret`, value: e.api_key_secret },
      );
    }
    endpoints.push({ baseUrl: e.base_url, model: e.model, apiKey: apiKey ?? null });
  }
  const lora = loraOf(spec);
  return {
    engine: new RemoteRolloutEngine({
      endpoints,
      maxInFlight: engine.max_in_flight_per_endpoint,
      timeoutMs: engine.timeout_s * 1000,
    }),
    publish: policyPublisher({
      upload: (folder, files) => ctx.publishRolloutPolicy!(folder, files),
      model: { ...run.model, parameters: run.theta.policy.params },
      lora: lora && { config: lora, baseModel: run.baseName },
    }),
  };
}

/**
 * The job's progress at `stage` with `step` of `total` updates done, and the ETA of the updates
 * (update_eta.ts) once this run has timed one; without it the worker's clock fills it in.
 */
function progressOf(run: RunState, stage: string, step: number, total: number): JobProgress {
  const etaS = run.updates.etaS(total, Date.now());
  return { stage, step, totalSteps: total, ...(etaS === undefined ? {} : { etaS }) };
}

/** The fields of the per-step `step` event. */
function summary(step: number, total: number, m: Record<string, number>) {
  const out: Record<string, unknown> = { step, total_steps: total };
  for (const k of [...STEP_EVENT_METRICS, "teacher_gap_mean", ...SIGNAL_METRIC_NAMES]) {
    if (k in m) out[k] = m[k];
  }
  for (const k of Object.keys(m)) {
    if (k.startsWith("eval/") && k.endsWith("success_rate")) out[k] = m[k];
  }
  return out;
}

/**
 * Evaluates the policy at `step`: its metrics, its `eval` events (one per split) and its dump
 * (none when the context keeps no trajectories), for the step's commit. Its seconds time the
 * evaluations left in the ETA (update_eta.ts).
 */
async function evaluateNow(run: RunState, step: number, total: number) {
  const { ctx, spec } = run;
  await ctx.setProgress(progressOf(run, "eval", step, total));
  const started = performance.now();
  const r = await evaluate(run.theta, {
    env: run.env,
    envOptions: spec.env.options,
    splits: spec.eval.splits,
    episodes: spec.eval.episodes,
    temperature: spec.eval.temperature,
    maxTurns: maxTurnsOf(spec, run.env),
    historyLength: spec.env.history,
    maxNewTokens: spec.rollout.max_new_tokens,
    seed: derivedSeed(spec.random_seed, SEED_USE.eval),
    ...(spec.eval.skills === "library" ? { skillFor: skillChooser(run.library) } : {}),
    signal: ctx.signal,
  });
  const seconds = (performance.now() - started) / 1000;
  run.updates.evaluated(seconds);
  return {
    metrics: { ...evalMetrics(r.splits), seconds_eval: seconds },
    events: r.splits.map((s) => ({ type: "eval", data: { step, ...s } })),
    dump: ctx.saveTrajectories ? evalDump(ctx.jobId, step, r) : undefined,
  };
}

/** The `checkpoint` event of a step, naming its files. */
function checkpointEvent(step: number, files: readonly { name: string }[]) {
  return { type: "checkpoint", data: { step, files: files.map((f) => f.name) } };
}

/** The checkpoint files and (for methods with analysis) the skill library of `step`. */
async function checkpointParts(run: RunState, step: number, total: number) {
  const { ctx, spec } = run;
  await ctx.setProgress(progressOf(run, "checkpoint", step, total));
  const state: TrainerState = {
    version: 1,
    job_id: ctx.jobId,
    method: spec.method,
    env_id: spec.env.id,
    step,
    total_steps: total,
    random_seed: spec.random_seed,
    rng: run.rng.state(),
    reference_step: run.referenceStep,
    skill_library: run.library.toJSON(step),
  };
  const optimizer = step > 0 ? run.optimizer.state() : null;
  return {
    checkpoint: checkpointFiles(
      run.model,
      optimizer,
      state,
      checkpointAdapter(spec, run.baseName, run.model),
    ),
    skills: run.plan.analysis
      ? { json: run.library.toJSON(step), skillCount: run.library.size }
      : undefined,
  };
}

/**
 * Re-commits what the resumed checkpoint's step lacks: its skill library (kept in the
 * checkpoint's trainer state) and its `checkpoint` event. A run that wrote a step's artifacts one
 * at a time (before steps were committed whole) could die between them and leave the job
 * `succeeded` without its final skill library.
 */
async function repairStep(ctx: JobContext, resume: ResumePoint, state: TrainerState) {
  const record = await ctx.stepRecord(resume.step);
  const lacksSkills = runPlan(ctx.spec).analysis && !record.skills;
  const lacksEvent = !record.events.includes("checkpoint");
  if (!record.metrics) {
    ctx.log.warn("the resumed step has no metrics row; they cannot be recomputed", {
      step: resume.step,
    });
  }
  if (!lacksSkills && !lacksEvent) return;
  ctx.log.info("re-committing what the resumed step lacks", {
    step: resume.step,
    skills: lacksSkills,
    event: lacksEvent,
  });
  const library = SkillLibrary.fromJSON(state.skill_library);
  await ctx.commitStep(resume.step, {
    skills: lacksSkills ? { json: state.skill_library, skillCount: library.size } : undefined,
    events: lacksEvent ? [checkpointEvent(resume.step, resume.files)] : [],
  });
}
