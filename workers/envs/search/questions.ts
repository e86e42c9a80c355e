/**
 * Questions over the search world (world.ts), in the three families of multi-hop QA data sets
 * such as HotpotQA (Yang et al. 2018): `single_hop` (one fact), `bridge` (a first fact names a
 * bridge entity, a second fact about it is the answer) and `comparison` (two entities' years,
 * the earlier one is the answer).
 *
 * Splits: relations `mentor`, `director` and `release_year` are held out: every `test_unseen`
 * question uses at least one of them and no `train` or `test_seen` question uses any. `train`
 * and `test_seen` ask about disjoint subjects: an entity is a `test_seen` subject when
 * {@link isTestSeenSubject} (about 1 in 5), so no `test_seen` question is a `train` question.
 *
 * Every question comes with its evidence: one hop per fact needed, each with the query the
 * expert searches (`{subject name} {keyword}`). A question is only kept when each hop's query
 * ranks the hop's evidence passage first, so the expert finds it with any `top_k`.
 */
import { hash32, Rng } from "../_rng.ts";
import type { Split } from "../types.ts";
import { type EntityKind, type Fact, factOf, type Relation, WORLD } from "./world.ts";
import { searchPassages } from "./retrieval.ts";

/** Question families. */
export type QuestionFamily = "single_hop" | "bridge" | "comparison";

/** All families, in a stable order. */
export const QUESTION_FAMILIES: readonly QuestionFamily[] = ["single_hop", "bridge", "comparison"];

/** How a relation is asked about, searched for and stated. */
export interface RelationSpec {
  subjectKind: EntityKind;
  /** The object: an entity kind, or `year` / `occupation` for literals. */
  objectKind: EntityKind | "year" | "occupation";
  /** Word of the evidence passage the expert adds to the subject's name in its query. */
  keyword: string;
  /** The single-hop question, `{s}` = the subject. */
  question: string;
  /**
   * Noun phrase for the object, for bridges (`the author of {s}`); entity-valued relations only.
   */
  phrase?: string;
  /** Comparison question (`{a}`, `{b}`), asking for the earlier one; year-valued relations only. */
  compare?: string;
  /** The fact as analyses state it, `{s}` subject and `{o}` object. */
  statement: string;
}

/** Every relation's wording (see the module comment for the held-out ones). */
export const RELATIONS: Readonly<Record<Relation, RelationSpec>> = {
  born_in: {
    subjectKind: "person",
    objectKind: "city",
    keyword: "born",
    question: "where was {s} born",
    phrase: "the birthplace of {s}",
    statement: "{s} was born in {o}",
  },
  birth_year: {
    subjectKind: "person",
    objectKind: "year",
    keyword: "born",
    question: "in which year was {s} born",
    compare: "who was born first, {a} or {b}",
    statement: "{s} was born in {o}",
  },
  occupation: {
    subjectKind: "person",
    objectKind: "occupation",
    keyword: "works",
    question: "what is the occupation of {s}",
    statement: "the occupation of {s} is {o}",
  },
  employer: {
    subjectKind: "person",
    objectKind: "company",
    keyword: "works",
    question: "which company does {s} work for",
    phrase: "the employer of {s}",
    statement: "{s} works at {o}",
  },
  mentor: {
    subjectKind: "person",
    objectKind: "person",
    keyword: "studied",
    question: "who was the mentor of {s}",
    phrase: "the mentor of {s}",
    statement: "{s} studied under {o}",
  },
  founding_year: {
    subjectKind: "company",
    objectKind: "year",
    keyword: "founded",
    question: "in which year was {s} founded",
    compare: "which company was founded first, {a} or {b}",
    statement: "{s} was founded in {o}",
  },
  founded_by: {
    subjectKind: "company",
    objectKind: "person",
    keyword: "founded",
    question: "who founded {s}",
    phrase: "the founder of {s}",
    statement: "{s} was founded by {o}",
  },
  headquarters: {
    subjectKind: "company",
    objectKind: "city",
    keyword: "headquartered",
    question: "in which city is {s} headquartered",
    phrase: "the home city of {s}",
    statement: "{s} is headquartered in {o}",
  },
  located_in: {
    subjectKind: "city",
    objectKind: "country",
    keyword: "city",
    question: "in which country is {s}",
    phrase: "the country where {s} lies",
    statement: "{s} is a city in {o}",
  },
  capital: {
    subjectKind: "country",
    objectKind: "city",
    keyword: "capital",
    question: "what is the capital of {s}",
    phrase: "the capital of {s}",
    statement: "the capital of {s} is {o}",
  },
  author: {
    subjectKind: "novel",
    objectKind: "person",
    keyword: "written",
    question: "who wrote {s}",
    phrase: "the author of {s}",
    statement: "{s} was written by {o}",
  },
  publication_year: {
    subjectKind: "novel",
    objectKind: "year",
    keyword: "published",
    question: "in which year was {s} published",
    compare: "which novel was published first, {a} or {b}",
    statement: "{s} was published in {o}",
  },
  director: {
    subjectKind: "film",
    objectKind: "person",
    keyword: "directed",
    question: "who directed {s}",
    phrase: "the director of {s}",
    statement: "{s} was directed by {o}",
  },
  release_year: {
    subjectKind: "film",
    objectKind: "year",
    keyword: "released",
    question: "in which year was {s} released",
    compare: "which film was released first, {a} or {b}",
    statement: "{s} was released in {o}",
  },
};

/** All relations, in a stable order. */
export const ALL_RELATIONS = Object.keys(RELATIONS) as Relation[];

/** Relations only `test_unseen` asks about. */
export const HELD_OUT_RELATIONS: ReadonlySet<Relation> = new Set([
  "mentor",
  "director",
  "release_year",
]);

/** One fact a question needs, and how the expert searches for it. */
export interface Hop {
  /** Subject entity id. */
  subject: number;
  relation: Relation;
  fact: Fact;
  /** The expert's query: the subject's name and the relation's keyword. */
  query: string;
}

/** A generated question with its answer and evidence. */
export interface Question {
  family: QuestionFamily;
  /** The question as shown, ending with `?`. */
  text: string;
  /** The gold answer (an entity name, a year or an occupation). */
  answer: string;
  /** The facts needed, in the order the expert searches them. */
  hops: Hop[];
  /** For a bridge: the bridge entity id (the first hop's object). */
  bridge?: number;
}

/** True when `entityId` is a subject of `test_seen` questions (never of `train` ones). */
export function isTestSeenSubject(entityId: number): boolean {
  return hash32(`search/test_seen/${WORLD.entities[entityId].name}`) % 5 === 0;
}

/** The relations a split may use, and whether a question must use a held-out one. */
function splitAllows(split: Split, relations: readonly Relation[]): boolean {
  const held = relations.some((r) => HELD_OUT_RELATIONS.has(r));
  return split === "test_unseen" ? held : !held;
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\w)\}/g, (_, k: string) => values[k]);
}

/** The hop for `relation(subject)` with the expert's query. */
export function hopOf(subject: number, relation: Relation): Hop {
  return {
    subject,
    relation,
    fact: factOf(subject, relation),
    query: `${WORLD.entities[subject].name} ${RELATIONS[relation].keyword}`,
  };
}

/** A subject of `kind` for `split` (train and test_seen draw from disjoint halves). */
function pickSubject(rng: Rng, kind: EntityKind, split: Split): number {
  const ids = WORLD.byKind[kind];
  for (;;) {
    const id = rng.pick(ids);
    if (split === "test_unseen" || isTestSeenSubject(id) === (split === "test_seen")) return id;
  }
}

/** Single-hop, bridge or comparison question drafts; null when the draw does not fit. */
function draft(rng: Rng, family: QuestionFamily, split: Split): Question | null {
  if (family === "single_hop") {
    const relation = rng.pick(ALL_RELATIONS.filter((r) => splitAllows(split, [r])));
    const spec = RELATIONS[relation];
    const hop = hopOf(pickSubject(rng, spec.subjectKind, split), relation);
    const s = WORLD.entities[hop.subject].name;
    return { family, text: `${fill(spec.question, { s })}?`, answer: hop.fact.value, hops: [hop] };
  }
  if (family === "bridge") {
    const pairs = ALL_RELATIONS.flatMap((r1) =>
      RELATIONS[r1].phrase === undefined ? [] : ALL_RELATIONS
        .filter((r2) => RELATIONS[r2].subjectKind === RELATIONS[r1].objectKind)
        .filter((r2) => splitAllows(split, [r1, r2]))
        .map((r2) => [r1, r2] as const)
    );
    const [r1, r2] = rng.pick(pairs);
    const first = hopOf(pickSubject(rng, RELATIONS[r1].subjectKind, split), r1);
    const bridge = first.fact.object!;
    const second = hopOf(bridge, r2);
    // No loops back to the subject ("the capital of the country where X lies" for a capital X).
    if (second.fact.object === first.subject) return null;
    const s = fill(RELATIONS[r1].phrase!, { s: WORLD.entities[first.subject].name });
    return {
      family,
      text: `${fill(RELATIONS[r2].question, { s })}?`,
      answer: second.fact.value,
      hops: [first, second],
      bridge,
    };
  }
  const relation = rng.pick(
    ALL_RELATIONS.filter((r) => RELATIONS[r].compare !== undefined && splitAllows(split, [r])),
  );
  const kind = RELATIONS[relation].subjectKind;
  const a = hopOf(pickSubject(rng, kind, split), relation);
  const b = hopOf(pickSubject(rng, kind, split), relation);
  if (a.subject === b.subject || a.fact.value === b.fact.value) return null;
  const earlier = Number(a.fact.value) < Number(b.fact.value) ? a : b;
  const names = { a: WORLD.entities[a.subject].name, b: WORLD.entities[b.subject].name };
  return {
    family,
    text: `${fill(RELATIONS[relation].compare!, names)}?`,
    answer: WORLD.entities[earlier.subject].name,
    hops: [a, b],
  };
}

/** True when every hop's expert query ranks its evidence passage first. */
function expertFindsEvidence(question: Question): boolean {
  return question.hops.every((hop) => searchPassages(hop.query, 1)[0] === hop.fact.passage);
}

/**
 * The question of a task: drawn from `seed` for `split`, of one of `families` (uniformly), and
 * redrawn (deterministically) until its expert queries find their evidence first.
 * @throws Error when `families` is empty.
 */
export function generateQuestion(
  seed: number,
  split: Split,
  families: readonly QuestionFamily[],
): Question {
  if (families.length === 0) {
    throw new Error("Cannot generate a question as families must not be empty: current is []");
  }
  const rng = new Rng(seed);
  const family = rng.pick(families);
  for (let attempt = 0; attempt < MAX_DRAWS; attempt++) {
    const question = draft(rng, family, split);
    if (question !== null && expertFindsEvidence(question)) return question;
  }
  throw new Error(
    `Cannot generate a ${family} question as one of ${MAX_DRAWS} draws must fit: seed ${seed} found none`,
  );
}

/** Draws per question before giving up (about 1 in 10 draws is redrawn, so never reached). */
const MAX_DRAWS = 1000;

/** The relations a question uses (for split checks and metrics). */
export function relationsOf(question: Question): Relation[] {
  return question.hops.map((h) => h.relation);
}

/** A fact as a sentence fragment: `The Silent Harbor was written by Arlen Vosk`. */
export function statementOf(fact: Fact): string {
  return fill(RELATIONS[fact.relation].statement, {
    s: WORLD.entities[fact.subject].name,
    o: fact.value,
  });
}
