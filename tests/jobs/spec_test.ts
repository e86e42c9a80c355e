import assert from "node:assert/strict";
import { z } from "zod";
import {
  armDefaults,
  JobSpecSchema,
  maxTurnsOf,
  parseJobSpec,
  parseStoredJobSpec,
  submittedFields,
} from "../../jobs/spec.ts";

const issuesOf = (input: unknown) =>
  JobSpecSchema.safeParse(input).error?.issues.map((i) => i.path.join(".")) ?? [];

Deno.test("an env id alone is a complete job spec with the documented defaults", () => {
  const spec = parseJobSpec({ env: { id: "sokoban" } });
  assert.equal(spec.method, "seed");
  assert.equal(spec.model.base, "builtin:tiny");
  // env.max_turns stays unset: it is the environment's default (maxTurnsOf, filled at submit).
  assert.deepEqual(spec.env, { id: "sokoban", options: {}, history: 2 });
  assert.equal(spec.advantage.invalid_action_penalty, 0.1);
  assert.equal(spec.seed.opd_coef, 0.01);
  assert.equal(spec.seed.gate_beta, 5);
  assert.equal(spec.optim.clip_ratio_low, 0.2);
  assert.equal(spec.optim.clip_ratio_high, 0.2);
  assert.equal(spec.optim.loss_aggregation, "micro_batch_token_mean");
  assert.equal(spec.optim.micro_batch_size, 8);
  assert.equal(spec.optim.dual_clip, 3);
  assert.equal(spec.optim.entropy_coef, 0);
  assert.equal(spec.optim.kl_coef, 0.01);
  assert.equal(spec.optim.lr, 3e-4);
  assert.equal(spec.optim.mini_batch_size, 256);
  assert.equal(spec.optim.lr_schedule, "warmup");
  assert.equal(spec.optim.warmup_steps, 2);
  assert.equal(spec.seed.analyzer_max_field_chars, 200);
  assert.deepEqual(
    { ...spec.warmup.analyzer },
    { episodes: 192, epochs: 2, lr: 2e-3, batch_size: 32 },
  );
  assert.equal(spec.experimental.corrective_share, 0);
  assert.equal(spec.warmup.skip, false);
  assert.equal(spec.requirements.device, "cpu");
  assert.equal(spec.max_attempts, 3);
});

Deno.test("a job runs with env.max_turns when set, else its environment's default turn limit", () => {
  const household = { defaultMaxTurns: 30 };
  assert.equal(maxTurnsOf(parseJobSpec({ env: { id: "household" } }), household), 30);
  assert.equal(
    maxTurnsOf(parseJobSpec({ env: { id: "household", max_turns: 20 } }), household),
    20,
  );
  assert.equal(maxTurnsOf(parseJobSpec({ env: { id: "household", max_turns: 1 } }), household), 1);
});

Deno.test("unknown fields are refused at every level with their path", () => {
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, colour: "red" }), [""]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban", size: 3 } }), ["env"]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, optim: { momentum: 0.9 } }), ["optim"]);
});

Deno.test("out-of-range and malformed values are refused with their path", () => {
  assert.deepEqual(issuesOf({}), ["env"]);
  assert.deepEqual(issuesOf({ env: { id: "Sokoban!" } }), ["env.id"]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, rollout: { group_size: 0 } }), [
    "rollout.group_size",
  ]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, optim: { lr: 0 } }), ["optim.lr"]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, method: "ppo" }), ["method"]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, max_attempts: 21 }), ["max_attempts"]);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, steps: 1.5 }), ["steps"]);
  const big = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
  assert.deepEqual(issuesOf({ env: { id: "sokoban", options: big } }), ["env.options"]);
});

Deno.test("model bases are builtin:tiny, an s3 folder, or an earlier job's checkpoint", () => {
  const ok = (base: string) =>
    JobSpecSchema.safeParse({ env: { id: "x" }, model: { base } }).success;
  assert.ok(ok("builtin:tiny"));
  assert.ok(ok("s3://models/qwen2.5-0.5b/"));
  assert.ok(ok("job:123e4567-e89b-12d3-a456-426614174000"));
  assert.ok(ok("job:123e4567-e89b-12d3-a456-426614174000@40"));
  assert.ok(!ok("s3://models/qwen"), "an s3 model folder ends with /");
  assert.ok(!ok("https://example.com/model/"));
  assert.ok(!ok("job:42"));
  assert.ok(!ok("builtin:huge"));
  // A plain relative key only: the worker refuses `..` and empty segments, so the submit does.
  assert.ok(ok("s3://seed/a/..x/"));
  for (const bad of ["s3://seed/a/../b/", "s3://seed/../x/", "s3://seed//x/", "s3://seed/a//b/"]) {
    assert.ok(!ok(bad), bad);
  }
  const data = (uri: string) =>
    JobSpecSchema.safeParse({ env: { id: "x" }, warmup: { data: uri } }).success;
  assert.ok(data("s3://seed/a/b.jsonl"));
  assert.ok(!data("s3://seed/a/../b.jsonl"));
});

Deno.test("a LoRA alpha of 0 is refused: the adapter would change nothing", () => {
  const lora = (alpha: number) =>
    JobSpecSchema.safeParse({ env: { id: "x" }, model: { lora: { alpha } } }).success;
  assert.ok(lora(8));
  assert.ok(!lora(0));
});

Deno.test("the spec converts to a JSON schema for the OpenAPI document", () => {
  const schema = z.toJSONSchema(JobSpecSchema, { io: "input" }) as {
    required?: string[];
    additionalProperties?: boolean;
  };
  assert.deepEqual(schema.required, ["env"]);
  assert.equal(schema.additionalProperties, false);
});

Deno.test("model.lora is off by default and fills PEFT's defaults when given", () => {
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).model.lora, undefined);
  const spec = parseJobSpec({ env: { id: "sokoban" }, model: { lora: {} } });
  assert.deepEqual(spec.model.lora, {
    rank: 8,
    alpha: 16,
    dropout: 0,
    target_modules: ["q_proj", "v_proj"],
    save_merged: false,
  });
  const lora = (l: unknown) => issuesOf({ env: { id: "sokoban" }, model: { lora: l } });
  assert.deepEqual(lora({ rank: 0 }), ["model.lora.rank"]);
  assert.deepEqual(lora({ dropout: 1 }), ["model.lora.dropout"]);
  assert.deepEqual(lora({ target_modules: ["fc1"] }), ["model.lora.target_modules.0"]);
  assert.deepEqual(lora({ target_modules: ["q_proj", "q_proj"] }), ["model.lora.target_modules"]);
  assert.deepEqual(lora({ target_modules: [] }), ["model.lora.target_modules"]);
  assert.deepEqual(lora({ rank: 4, bias: "all" }), ["model.lora"]);
});

Deno.test("warmup.policy.skill_epochs is at most warmup.policy.epochs and absent by default", () => {
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).warmup.policy.skill_epochs, undefined);
  const spec = { env: { id: "sokoban" }, warmup: { policy: { epochs: 6, skill_epochs: 2 } } };
  assert.equal(parseJobSpec(spec).warmup.policy.skill_epochs, 2);
  assert.deepEqual(
    issuesOf({ env: { id: "sokoban" }, warmup: { policy: { epochs: 2, skill_epochs: 3 } } }),
    ["warmup.policy.skill_epochs"],
  );
});

Deno.test("a new spec with optim.clip_ratio is refused with a message naming its replacements", () => {
  const r = JobSpecSchema.safeParse({ env: { id: "sokoban" }, optim: { clip_ratio: 0.2 } });
  assert.equal(r.success, false);
  const [issue] = r.error!.issues;
  assert.equal(issue.path.join("."), "optim");
  assert.match(
    issue.message,
    /optim\.clip_ratio .*optim\.clip_ratio_low and optim\.clip_ratio_high/,
  );
  // other unknown optim fields keep zod's own message
  assert.match(issuesOf({ env: { id: "x" }, optim: { foo: 1 } }).join(), /optim/);
});

Deno.test("a stored spec with the old clip_ratio loads with both bounds and its old token-mean loss", () => {
  const stored = { env: { id: "sokoban" }, optim: { clip_ratio: 0.15, lr: 1e-3 } };
  const spec = parseStoredJobSpec(stored);
  assert.equal(spec.optim.clip_ratio_low, 0.15);
  assert.equal(spec.optim.clip_ratio_high, 0.15);
  assert.equal(spec.optim.loss_aggregation, "token_mean");
  assert.equal(spec.optim.lr, 1e-3);
  assert.deepEqual(stored.optim, { clip_ratio: 0.15, lr: 1e-3 }, "the input is not modified");
  // a current spec reads as parseJobSpec reads it
  assert.deepEqual(
    parseStoredJobSpec({ env: { id: "sokoban" } }),
    parseJobSpec({ env: { id: "sokoban" } }),
  );
  assert.throws(() => parseStoredJobSpec({ env: { id: "sokoban" }, optim: { clip_ratio: 2 } }));
});

Deno.test("corrective_share is set under experimental and refused at its old path with the new one named", () => {
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).experimental.corrective_share, 0);
  const set = { env: { id: "sokoban" }, experimental: { corrective_share: 0.25 } };
  assert.equal(parseJobSpec(set).experimental.corrective_share, 0.25);
  const r = JobSpecSchema.safeParse({
    env: { id: "sokoban" },
    warmup: { policy: { corrective_share: 0.25 } },
  });
  assert.equal(r.success, false);
  const [issue] = r.error!.issues;
  assert.equal(issue.path.join("."), "warmup.policy");
  assert.match(issue.message, /warmup\.policy\.corrective_share .*experimental\.corrective_share/);
  assert.deepEqual(issuesOf({ env: { id: "sokoban" }, experimental: { foo: 1 } }), [
    "experimental",
  ]);
});

Deno.test("a stored spec with warmup.policy.corrective_share reads it as experimental.corrective_share", () => {
  const stored = {
    ...parseJobSpec({ env: { id: "sokoban" } }),
    experimental: undefined,
  } as Record<string, unknown>;
  delete stored.experimental;
  const warmup = stored.warmup as { policy: Record<string, unknown> };
  stored.warmup = { ...warmup, policy: { ...warmup.policy, corrective_share: 0.25 } };
  const spec = parseStoredJobSpec(stored);
  assert.equal(spec.experimental.corrective_share, 0.25);
  assert.equal("corrective_share" in spec.warmup.policy, false);
  assert.deepEqual(
    spec,
    parseJobSpec({ env: { id: "sokoban" }, experimental: { corrective_share: 0.25 } }),
  );
  assert.equal(
    (stored.warmup as { policy: Record<string, unknown> }).policy.corrective_share,
    0.25,
    "the input is not modified",
  );
});

Deno.test("each method's advantage defaults are the authors' launcher settings for its environment", () => {
  const adv = (method: string, env: string) => {
    const { estimator, norm, invalid_action_penalty } = parseJobSpec({ method, env: { id: env } })
      .advantage;
    return [estimator, norm, invalid_action_penalty];
  };
  // seed and grpo: episode-level; mean-only on webshop; p 0.01 on search.
  for (const method of ["seed", "grpo"]) {
    assert.deepEqual(adv(method, "sokoban"), ["grpo", "mean_std", 0.1]);
    assert.deepEqual(adv(method, "household"), ["grpo", "mean_std", 0.1]);
    assert.deepEqual(adv(method, "ezpoints"), ["grpo", "mean_std", 0.1]);
    assert.deepEqual(adv(method, "webshop"), ["grpo", "mean", 0.1]);
    assert.deepEqual(adv(method, "search"), ["grpo", "mean_std", 0.01]);
    assert.deepEqual(adv(method, "my-env"), ["grpo", "mean_std", 0.1]);
  }
  // gigpo: episode + step level; mean-only where their GiGPO launchers say so.
  assert.deepEqual(adv("gigpo", "sokoban"), ["gigpo", "mean", 0.1]);
  assert.deepEqual(adv("gigpo", "ezpoints"), ["gigpo", "mean", 0.1]);
  assert.deepEqual(adv("gigpo", "household"), ["gigpo", "mean_std", 0.1]);
  assert.deepEqual(adv("gigpo", "search"), ["gigpo", "mean_std", 0.01]);
  assert.deepEqual(adv("gigpo", "my-env"), ["gigpo", "mean", 0.1]);
  assert.deepEqual(armDefaults("seed", "webshop"), {
    estimator: "grpo",
    norm: "mean",
    invalid_action_penalty: 0.1,
  });
});

Deno.test("advantage fields the user sets win over the arm's defaults, field by field", () => {
  // seed on GiGPO: the estimator set, the rest from GiGPO's row.
  const onGigpo = parseJobSpec({ env: { id: "sokoban" }, advantage: { estimator: "gigpo" } });
  assert.equal(onGigpo.method, "seed");
  assert.deepEqual(
    [onGigpo.advantage.estimator, onGigpo.advantage.norm, onGigpo.advantage.invalid_action_penalty],
    ["gigpo", "mean", 0.1],
  );
  const own = parseJobSpec({
    method: "gigpo",
    env: { id: "search" },
    advantage: { norm: "mean_std", invalid_action_penalty: 1, gamma: 0.9 },
  }).advantage;
  assert.deepEqual(own, {
    estimator: "gigpo",
    norm: "mean_std",
    invalid_action_penalty: 1,
    gamma: 0.9,
    reward_source: "success",
  });
  assert.equal(
    parseJobSpec({ env: { id: "search" }, advantage: { invalid_action_penalty: 0 } }).advantage
      .invalid_action_penalty,
    0,
  );
  // A parsed spec parses to itself (the worker parses the stored spec again).
  assert.deepEqual(parseJobSpec(onGigpo), onGigpo);
});

Deno.test("seed.skill_source is policy by default; reference needs method seed with analysis", () => {
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).seed.skill_source, "policy");
  const oracle = parseJobSpec({ env: { id: "sokoban" }, seed: { skill_source: "reference" } });
  assert.equal(oracle.seed.skill_source, "reference");
  const sokoban = { id: "sokoban" };
  assert.deepEqual(issuesOf({ env: sokoban, seed: { skill_source: "oracle" } }), [
    "seed.skill_source",
  ]);
  for (const method of ["grpo", "gigpo", "sft"]) {
    assert.deepEqual(issuesOf({ method, env: sokoban, seed: { skill_source: "reference" } }), [
      "seed.skill_source",
    ]);
  }
  assert.deepEqual(
    issuesOf({ env: sokoban, seed: { skill_source: "reference", analyze: "none" } }),
    ["seed.skill_source"],
  );
  assert.deepEqual(issuesOf({ env: sokoban, method: "gigpo", advantage: { norm: "max" } }), [
    "advantage.norm",
  ]);
});

Deno.test("warmup.policy checks are off by default and a target_success needs checks to reach it", () => {
  const policy = (p: Record<string, unknown>) => ({
    env: { id: "sokoban" },
    warmup: { policy: p },
  });
  const parsed = parseJobSpec(policy({})).warmup.policy;
  assert.equal(parsed.target_success, undefined);
  assert.equal(parsed.check_every, 0);
  assert.equal(parsed.check_episodes, 0);
  assert.equal(parsed.lr_schedule, "constant");
  const checked = { target_success: 0.45, check_every: 56, check_episodes: 64 };
  assert.equal(parseJobSpec(policy(checked)).warmup.policy.target_success, 0.45);
  assert.deepEqual(issuesOf(policy({ ...checked, check_every: 0 })), [
    "warmup.policy.target_success",
  ]);
  assert.deepEqual(issuesOf(policy({ ...checked, check_episodes: 0 })), [
    "warmup.policy.target_success",
  ]);
  assert.deepEqual(issuesOf(policy({ ...checked, target_success: 1.5 })), [
    "warmup.policy.target_success",
  ]);
  assert.deepEqual(issuesOf(policy({ lr_schedule: "linear" })), ["warmup.policy.lr_schedule"]);
});

Deno.test("rollout.engine is local by default, or endpoints with bounded in-flight requests", () => {
  assert.equal(parseJobSpec({ env: { id: "sokoban" } }).rollout.engine, "local");
  const spec = parseJobSpec({
    env: { id: "sokoban" },
    rollout: { engine: { endpoints: [{ base_url: "https://a.example.com", model: "policy" }] } },
  });
  assert.deepEqual(spec.rollout.engine, {
    endpoints: [{ base_url: "https://a.example.com", model: "policy" }],
    max_in_flight_per_endpoint: 16,
    timeout_s: 120,
  });
  const refused = (engine: unknown) => issuesOf({ env: { id: "sokoban" }, rollout: { engine } });
  assert.ok(refused("vllm").includes("rollout.engine"));
  assert.ok(refused({ endpoints: [] }).includes("rollout.engine.endpoints"));
  assert.ok(
    refused({ endpoints: [{ base_url: "x", model: "p" }] }).includes(
      "rollout.engine.endpoints.0.base_url",
    ),
  );
  assert.ok(
    refused({ endpoints: [{ base_url: "https://a.example.com", model: "p", key: "k" }] })
      .some((p: string) => p.startsWith("rollout.engine")),
  );
});

Deno.test("seed.max_step_skills defaults to the authors' launcher count per environment where the reference analyzer writes step skills", () => {
  // examples/seed_trainer/_common: alfworld.sh and webshop.sh 5, search.sh 2, episode_only for
  // sokoban_visual.sh and ezpoints.sh.
  const defaults = ["household", "webshop", "search", "sokoban", "ezpoints", "my-env"].map((id) =>
    parseJobSpec({ env: { id }, seed: { skill_source: "reference" } }).seed.max_step_skills
  );
  assert.deepEqual(defaults, [5, 5, 2, 0, 0, 0]);
  assert.equal(
    parseJobSpec({
      env: { id: "household" },
      seed: { skill_source: "reference", max_step_skills: 0 },
    })
      .seed.max_step_skills,
    0,
  );
  assert.deepEqual(issuesOf({ env: { id: "household" }, seed: { max_step_skills: -1 } }), [
    "seed.max_step_skills",
  ]);
  assert.deepEqual(issuesOf({ env: { id: "household" }, seed: { max_step_skills: 1.5 } }), [
    "seed.max_step_skills",
  ]);
});

Deno.test("seed.max_step_skills defaults to 0 where nothing writes step skills, and a value set there is accepted as the other seed fields are", () => {
  // The policy's analyzer writes no step skills; grpo, gigpo and sft analyse nothing.
  const policy = parseJobSpec({ env: { id: "household" } });
  assert.equal(policy.seed.skill_source, "policy");
  assert.equal(policy.seed.max_step_skills, 0);
  for (const method of ["grpo", "gigpo", "sft"] as const) {
    assert.equal(parseJobSpec({ method, env: { id: "household" } }).seed.max_step_skills, 0);
  }
  // The convention of the other seed fields (opd_coef under grpo, say): accepted, kept, unused.
  assert.equal(
    parseJobSpec({ method: "grpo", env: { id: "household" }, seed: { max_step_skills: 3 } })
      .seed.max_step_skills,
    3,
  );
  assert.equal(
    parseJobSpec({ env: { id: "household" }, seed: { max_step_skills: 3 } }).seed.max_step_skills,
    3,
  );
});

Deno.test("a stored spec keeps its seed.max_step_skills, and one stored without it keeps 0", () => {
  // Stored by an earlier release, which filled 5 for household whatever the skill source.
  const stored = { ...parseJobSpec({ env: { id: "household" } }) } as Record<string, unknown>;
  const earlier = { ...stored, seed: { ...(stored.seed as object), max_step_skills: 5 } };
  assert.equal(parseStoredJobSpec(earlier).seed.max_step_skills, 5);
  const oracle = parseJobSpec({ env: { id: "household" }, seed: { skill_source: "reference" } });
  assert.equal(parseStoredJobSpec(oracle).seed.max_step_skills, 5);
  // A job stored before the field ran without step skills and resumes without them.
  const { max_step_skills: _, ...oldSeed } = oracle.seed as Record<string, unknown>;
  assert.equal(parseStoredJobSpec({ ...oracle, seed: oldSeed }).seed.max_step_skills, 0);
});

Deno.test("submittedFields keeps what the client wrote, defaults left out, and only what the parse kept", () => {
  const input = {
    env: { id: "household", options: { families: ["pick_and_place"] } },
    rollout: { engine: { endpoints: [{ base_url: "https://a.example.com", model: "m" }] } },
    seed: { skill_source: "reference" },
  };
  const spec = parseJobSpec(input);
  assert.equal(spec.seed.max_step_skills, 5);
  assert.deepEqual(submittedFields(input, spec), input);
  // A field the parse does not hold (here a value no schema would keep, passed beside a parse
  // that dropped it) is not kept, at any depth, inside arrays too, nor is an own `__proto__` key.
  const extra = JSON.parse(JSON.stringify(input));
  extra.api_key = "sk-top";
  extra.env.token = "sk-env";
  extra.rollout.engine.endpoints[0].api_key = "sk-endpoint";
  extra.seed = JSON.parse('{"skill_source": "reference", "__proto__": {"polluted": true}}');
  const kept = submittedFields(extra, spec);
  assert.deepEqual(kept, input);
  assert.doesNotMatch(JSON.stringify(kept), /sk-|polluted/);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});
