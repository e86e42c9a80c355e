/**
 * Fixture of the inference-server tests: a fresh database and s3rver bucket (tests/_harness), two
 * tenants with a key each, and jobs whose checkpoints are builtin:tiny models for sokoban with
 * seeded random weights, written by the trainer's checkpoint writer (`checkpointFiles`) through
 * the real fenced `saveCheckpoint`, with skill libraries saved the same way.
 */
import {
  createKey,
  type Database,
  ensureTenant,
  getCheckpoint,
  readCheckpointFile,
  type TenantRef,
} from "../../../jobs/mod.ts";
import { saveJob } from "../../../workers/seed/run/saved_job.ts";
import type { AsyncEnvironment } from "../../../workers/envs/mod.ts";
import { resolveEnvironment } from "../../../workers/envs/mod.ts";
import {
  createBuiltinTiny,
  declaredEosTokenIds,
  type HfModel,
  loadHfDirectory,
  Policy,
  Tokenizer,
} from "../../../workers/model/mod.ts";
import { builtinVocabulary, probeFirstTurn } from "../../../workers/seed/run/model_source.ts";
import { SkillLibrary } from "../../../workers/skills/mod.ts";
import { TextPolicy } from "../../../workers/seed/text_policy.ts";
import { openTestDatabase } from "../../_harness/fixtures.ts";
import { startTestStore, type TestStore } from "../../_harness/s3.ts";

/** What a serve test works with. */
export interface ServeFixture {
  db: Database;
  s3: TestStore;
  env: AsyncEnvironment;
  /** A sokoban turn prompt (the first turn of a train task). */
  prompt: string;
  tenantA: TenantRef;
  tenantB: TenantRef;
  keyA: string;
  keyB: string;
  close(): Promise<void>;
}

/** Opens the database and store, makes two tenants with a key each. */
export async function startServeFixture(): Promise<ServeFixture> {
  const t = await openTestDatabase();
  const s3 = await startTestStore();
  const tenantA = await ensureTenant(t.db, `a-${crypto.randomUUID()}`);
  const tenantB = await ensureTenant(t.db, `b-${crypto.randomUUID()}`);
  const env = await resolveEnvironment("sokoban");
  return {
    db: t.db,
    s3,
    env,
    prompt: (await probeFirstTurn(env, {})).prompt,
    tenantA,
    tenantB,
    keyA: (await createKey(t.db, tenantA.name)).key,
    keyB: (await createKey(t.db, tenantB.name)).key,
    async close() {
      await t.close();
      await s3.close();
    },
  };
}

/** A skill to put in a library: its text and sightings (won/lost). */
export interface SkillInput {
  text: string;
  summary?: string;
  won: number;
  lost: number;
}

/**
 * A job of `tenant` with a builtin:tiny checkpoint (weights seeded by `seed + step`) at each of
 * `steps` and a skill library at the steps of `skills` (see `saveJob`,
 * workers/seed/run/saved_job.ts).
 */
export async function jobWithCheckpoints(
  fx: ServeFixture,
  tenant: TenantRef,
  options: { steps: number[]; seed?: number; skills?: Record<number, SkillInput[]> },
): Promise<string> {
  const vocabulary = await builtinVocabulary(fx.env);
  const checkpoints = options.steps.map((step) => ({
    step,
    model: createBuiltinTiny({ vocabulary, seed: (options.seed ?? 1) + step }),
  }));
  const libraries = Object.entries(options.skills ?? {}).map(([step, skills]) => {
    const library = new SkillLibrary("job");
    for (const [k, s] of skills.entries()) {
      for (let i = 0; i < s.won + s.lost; i++) {
        library.add(s.text, {
          step: Number(step),
          taskId: `sokoban/train/6x6-1/${k}`,
          trajectoryId: `t-${k}-${i}`,
          success: i < s.won,
          meanTeacherGap: 0.1 * k,
        }, s.summary ?? "");
      }
    }
    return { step: Number(step), library };
  });
  return await saveJob(fx.db, fx.s3.store, tenant.id, checkpoints, libraries);
}

/** A job's checkpoint at `step` as the trainer reads it, and its text policy (one thread). */
export async function trainerPolicy(
  fx: ServeFixture,
  jobId: string,
  step: number,
): Promise<{ model: HfModel; text: TextPolicy }> {
  const ck = (await getCheckpoint(fx.db, jobId, step))!;
  const names = new Set(ck.files.map((f) => f.name));
  const model = await loadHfDirectory((name) =>
    names.has(name) ? readCheckpointFile(fx.s3.store, ck, name) : Promise.resolve(null)
  );
  const policy = new Policy(model.config, model.parameters, { threads: 1 });
  const eosTokenIds = declaredEosTokenIds(model);
  return { model, text: new TextPolicy(policy, new Tokenizer(model.tokenizer), { eosTokenIds }) };
}
