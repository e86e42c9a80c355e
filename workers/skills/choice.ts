/**
 * Which skill of a library to give the policy: two rules, one per caller.
 *
 * **By family, at evaluation** (JobSpec `eval.skills: "library"`, {@link skillChooser}): the
 * library's best skill for the task's family. The rule, in order:
 *
 * 1. **Same family.** Only skills seen at least once in a trajectory of the task's family
 *    (`Task.family`; among the sightings a record keeps, the latest 32) are candidates. None → no
 *    skill (the prompt stays as it is).
 * 2. **Workflow skills first.** Candidates seen in a *won* trajectory of the family (the analyzer
 *    wrote them as the workflow that worked) rank above those seen only in lost ones (avoidance
 *    rules).
 * 3. **Measured Δ, shrunk by evidence.** Then by `meanTeacherGap · n / (n + 1)` with n the number
 *    of sightings that measured Δ (`gapCount`): the mean teacher gap Δ = ℓ_T − ℓ_old (nats per
 *    token: how much the skill in the prompt raised the log-probs of its trajectory's actions)
 *    pulled toward 0 by one pseudo-sighting, so a skill measured once needs a larger Δ than one
 *    measured many times. Skills never re-scored (no Δ) come after every measured one.
 * 4. **Then how often it was seen** (`timesSeen`, more first), then library order (older first).
 *
 * The choice depends on the family only, so every task of a family gets the same skill.
 *
 * **By words, at inference** (the server's `skills` extension, {@link chooseSkill}): a library
 * records each skill's text, episode summary and counts, not the instructions of the tasks it came
 * from, so the match is made on words: a skill's relevance to a prompt's task is the share of the
 * task's content words (lower-cased letters/digits runs of ≥ 2 characters, minus a short stop
 * list) that occur in the skill's text or summary. The best skill has the highest relevance, then
 * the highest success share (workflows of won episodes before avoidance rules of lost ones), then
 * the most sightings, then the largest mean teacher gap Δ (the skill moved the policy most), then
 * the earliest recorded. Without a task line every skill has relevance 0 and the rest of the order
 * decides.
 */
import type { SkillLibrary, SkillRecord } from "./library.ts";

/** Δ shrunk toward 0 by one pseudo-sighting (rule 3); −∞ when the skill has no measured Δ. */
export function shrunkTeacherGap(record: SkillRecord): number {
  if (record.meanTeacherGap === null || record.gapCount === 0) return -Infinity;
  return record.meanTeacherGap * record.gapCount / (record.gapCount + 1);
}

/** The candidates of `family`, best first (rules 1–4 of the module doc). */
export function rankSkillsForFamily(library: SkillLibrary, family: string): SkillRecord[] {
  const ranked = library.all().map((record, order) => {
    const sightings = record.provenance.filter((p) => p.family === family);
    return { record, order, seen: sightings.length > 0, won: sightings.some((p) => p.success) };
  }).filter((c) => c.seen);
  ranked.sort((a, b) =>
    Number(b.won) - Number(a.won) ||
    compareDesc(shrunkTeacherGap(a.record), shrunkTeacherGap(b.record)) ||
    b.record.timesSeen - a.record.timesSeen ||
    a.order - b.order
  );
  return ranked.map((c) => c.record);
}

/** Descending order of two numbers that may be −∞ (equal infinities compare as 0, not NaN). */
function compareDesc(a: number, b: number): number {
  return a === b ? 0 : b > a ? 1 : -1;
}

/** The best skill text for a task of `family`, or null when the library has none for it. */
export function bestSkillForFamily(library: SkillLibrary, family: string): string | null {
  return rankSkillsForFamily(library, family)[0]?.text ?? null;
}

/**
 * A `task → skill` chooser over `library` for evaluation (`EvaluateOptions.skillFor`): the
 * {@link bestSkillForFamily} of the task's family, ranked once per family per chooser.
 */
export function skillChooser(library: SkillLibrary): (task: { family: string }) => string | null {
  const chosen = new Map<string, string | null>();
  return (task) => {
    if (!chosen.has(task.family)) chosen.set(task.family, bestSkillForFamily(library, task.family));
    return chosen.get(task.family)!;
  };
}

/** Words that carry no task content. */
const STOP_WORDS = new Set(
  ("a an and are as at be by for from in into is it its of on or the then to with your you " +
    "task this that all any some").split(" "),
);

/** The content words of `text` (see module doc). */
export function contentWords(text: string): Set<string> {
  const words = text.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [];
  return new Set(words.filter((w) => !STOP_WORDS.has(w)));
}

/** A chosen skill and why. */
export interface SkillChoice {
  record: SkillRecord;
  /** Share of the task's content words found in the skill's text or summary, in [0, 1]. */
  relevance: number;
}

/** The best skill of `library` for `task` (see module doc); null for an empty library. */
export function chooseSkill(library: SkillLibrary, task: string | null): SkillChoice | null {
  const want = contentWords(task ?? "");
  const scored = library.all().map((record, order) => {
    const have = contentWords(`${record.text} ${record.summary}`);
    let hits = 0;
    for (const w of want) if (have.has(w)) hits++;
    return { record, order, relevance: want.size ? hits / want.size : 0 };
  });
  const success = (r: SkillRecord) => r.successCount / r.timesSeen;
  scored.sort((a, b) =>
    b.relevance - a.relevance || success(b.record) - success(a.record) ||
    b.record.timesSeen - a.record.timesSeen ||
    (b.record.meanTeacherGap ?? -Infinity) - (a.record.meanTeacherGap ?? -Infinity) ||
    a.order - b.order
  );
  return scored.length ? { record: scored[0].record, relevance: scored[0].relevance } : null;
}
