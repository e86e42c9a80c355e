/**
 * Which skill of a job's library to put into a prompt at inference (the `skills` extension).
 *
 * A library records each skill's text, episode summary and counts, not the instructions of the
 * tasks it came from, so the match is made on words: a skill's relevance to a prompt's task is
 * the share of the task's content words (lower-cased letters/digits runs of ≥ 2 characters, minus
 * a short stop list) that occur in the skill's text or summary. The best skill has the highest
 * relevance, then the highest success share (workflows of won episodes before avoidance rules of
 * lost ones), then the most sightings, then the largest mean teacher gap Δ (the skill moved the
 * policy most), then the earliest recorded. Without a task line every skill has relevance 0 and
 * the rest of the order decides.
 */
import type { SkillLibrary, SkillRecord } from "../seed/skill_library.ts";

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
