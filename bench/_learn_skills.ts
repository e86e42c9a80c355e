/**
 * The skill texts of `deno task bench:learn` (pure): each SEED-method run's skill library as the
 * job committed it (workers/skills/library.ts, the stored form that `GET /v1/jobs/{id}/skills`
 * serves as `library`), written as `skills.jsonl` so the skills the analyzer wrote can be read
 * after a run. Only methods with analysis commit a library (workers/seed/run/handler.ts
 * `checkpointParts`), and only at checkpointed steps: in bench:learn (`checkpoint_every` 1000)
 * step 0 and the last update.
 */
import { skillLibraryJson } from "../workers/skills/library.ts";

/**
 * The `skills.jsonl` lines of one run: one JSON object per update (`step` ≥ 1; a job's step-0
 * library is its empty start) at which the job committed its skill library, in step order, as
 * `{env, arm, method, seed, step, skill_count, library}` (`skill_count` and `library` as in
 * `GET /v1/jobs/{id}/skills`). `libraries` maps step → the committed library JSON
 * (bench/_memory_context.ts `MemoryRun.skills`); a run without analysis has none and gets no line.
 * Throws `Error` naming the step when a library does not match version 1 of the stored format.
 */
export function skillLines(
  run: { env: string; arm: string; method: string; seed: number },
  libraries: ReadonlyMap<number, unknown>,
): string[] {
  const out: string[] = [];
  for (const [step, json] of [...libraries].sort((a, b) => a[0] - b[0])) {
    if (step < 1) continue;
    const parsed = skillLibraryJson.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(
        `Cannot write skills.jsonl as the skill library of ${run.env} ${run.arm} seed ${run.seed} ` +
          `at step ${step} must match version 1 of the stored format: ` +
          `${issue.path.join(".") || "(root)"} ${issue.message}`,
        { cause: parsed.error },
      );
    }
    out.push(JSON.stringify({
      env: run.env,
      arm: run.arm,
      method: run.method,
      seed: run.seed,
      step,
      skill_count: parsed.data.skills.length,
      library: parsed.data,
    }));
  }
  return out;
}
