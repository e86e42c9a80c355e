/**
 * The search environment's knowledge corpus: a generated world of fictional entities with typed
 * attributes and relations, written out as short encyclopedia passages (one sentence each).
 *
 * Entities: 20 countries, 120 cities (6 per country; the first is the capital), 900 people, 160
 * companies, 200 novels and 200 films. Facts (each a typed relation from a subject entity to an
 * entity or a literal):
 *
 * | relation           | subject → object  | passage                                             |
 * |--------------------|-------------------|-----------------------------------------------------|
 * | `born_in`, `birth_year` | person → city, year | `{p} was born in {city} in {year}.`            |
 * | `occupation`, `employer` | person → word, company | `{p} works as a {job} at {company}.`     |
 * | `mentor`           | person → person   | `{p} studied under {person}.`                       |
 * | `founding_year`, `founded_by` | company → year, person | `{c} was founded in {year} by {p}.` |
 * | `headquarters`     | company → city    | `{c} is headquartered in {city}.`                   |
 * | `located_in`       | city → country    | `{city} is a city in {country}.`                    |
 * | `capital`          | country → city    | `The capital of {country} is {city}.`               |
 * | `author`, `publication_year` | novel → person, year | `{n} is a novel written by {p} and published in {year}.` |
 * | `director`, `release_year` | film → person, year | `{f} is a film directed by {p} and released in {year}.` |
 *
 * 3,560 passages in all. Names are made-up words built from syllables (people: first name and
 * surname; companies: a stem and a kind such as `Labs`; novels `The {Adjective} {Noun}`, films
 * `{Adjective} {Noun}` from other word pools), unique across the world, so every question has one
 * answer. Everything is a pure function of {@link WORLD_SEED}: every machine has the same world.
 */
import { hash32, Rng } from "../_rng.ts";

/** The generator seed of the world (changing it changes every task). */
export const WORLD_SEED = hash32("search/world/v1");

/** Entity kinds. */
export type EntityKind = "person" | "city" | "country" | "company" | "novel" | "film";

/** One entity of the world. */
export interface Entity {
  /** Index in {@link WORLD}.entities. */
  id: number;
  kind: EntityKind;
  /** Its unique name as passages and questions write it, e.g. `Arlen Vosk`, `The Silent Harbor`. */
  name: string;
}

/** The typed relations (attributes are relations to a literal: a year or an occupation). */
export type Relation =
  | "born_in"
  | "birth_year"
  | "occupation"
  | "employer"
  | "mentor"
  | "founding_year"
  | "founded_by"
  | "headquarters"
  | "located_in"
  | "capital"
  | "author"
  | "publication_year"
  | "director"
  | "release_year";

/** One fact: `relation(subject) = value`, stated by one passage. */
export interface Fact {
  relation: Relation;
  /** Subject entity id. */
  subject: number;
  /** Object entity id, or null for a literal (year, occupation). */
  object: number | null;
  /** The object as text: the object entity's name, a year (`1931`) or an occupation. */
  value: string;
  /** Index of the passage that states it. */
  passage: number;
}

/** One passage of the corpus. */
export interface Passage {
  /** Index in {@link WORLD}.passages. */
  id: number;
  text: string;
  /** The entity the passage is about (its first words name it). */
  subject: number;
}

/** The whole generated world. */
export interface World {
  entities: Entity[];
  passages: Passage[];
  /** Every fact, keyed by `${subject}/${relation}` (every relation is functional). */
  facts: Map<string, Fact>;
  /** Entity ids by kind, in generation order. */
  byKind: Record<EntityKind, number[]>;
}

/** Occupations of people (literal values of `occupation`). */
export const OCCUPATIONS: readonly string[] = [
  "painter",
  "engineer",
  "chemist",
  "architect",
  "composer",
  "surgeon",
  "economist",
  "astronomer",
  "sculptor",
  "geologist",
  "pilot",
  "historian",
  "botanist",
  "lawyer",
  "photographer",
  "mathematician",
];

/** Second words of company names. */
export const COMPANY_KINDS: readonly string[] = [
  "Labs",
  "Works",
  "Group",
  "Systems",
  "Motors",
  "Foods",
  "Textiles",
  "Press",
];

/** Adjectives and nouns of novel titles (`The Silent Harbor`). */
export const NOVEL_WORDS = {
  adjectives: [
    "Silent",
    "Hollow",
    "Distant",
    "Crimson",
    "Forgotten",
    "Endless",
    "Quiet",
    "Broken",
    "Golden",
    "Hidden",
    "Last",
    "Northern",
    "Burning",
    "Paper",
    "Winter",
    "Wandering",
  ],
  nouns: [
    "Harbor",
    "Garden",
    "Orchard",
    "Tower",
    "Letter",
    "Island",
    "Bridge",
    "Kingdom",
    "Lantern",
    "Meadow",
    "Promise",
    "Voyage",
    "Library",
    "Station",
    "Crown",
    "Mirror",
  ],
} as const;

/** Adjectives and nouns of film titles (`Glass River`), disjoint from the novels'. */
export const FILM_WORDS = {
  adjectives: [
    "Glass",
    "Iron",
    "Velvet",
    "Scarlet",
    "Electric",
    "Midnight",
    "Silver",
    "Wild",
    "Frozen",
    "Neon",
    "Copper",
    "Restless",
    "Amber",
    "Savage",
    "Lucky",
    "Blue",
  ],
  nouns: [
    "River",
    "Horizon",
    "Signal",
    "Canyon",
    "Engine",
    "Circus",
    "Frontier",
    "Storm",
    "Highway",
    "Desert",
    "Echo",
    "Comet",
    "Rebel",
    "Harvest",
    "Border",
    "Falcon",
  ],
} as const;

const ONSETS = ["b", "br", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s"]
  .concat(["st", "t", "tr", "v", "z", "th", "sh", "c", "j"]);
const VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o"];
/** Between the two syllables of a name: nothing or one soft consonant. */
const MIDDLES = ["", "", "n", "r", "l"];
/** Consonants that start a second syllable. */
const SECOND_ONSETS = ["b", "d", "g", "k", "l", "m", "n", "r", "s", "t", "v", "th"];
const CODAS = ["", "", "n", "r", "s", "l", "th", "x", "nd"];

/** Endings that mark a word as a place: cities and countries. */
const CITY_ENDINGS = ["moor", "ford", "holm", "gate", "wick", "dale", "port", "mere", "stead"];
const COUNTRY_ENDINGS = ["ia", "land", "ar", "ova", "esh"];

/** Words a generated name must never be (they occur in templates, questions or analyses). */
const RESERVED = new Set([
  "a",
  "an",
  "and",
  "as",
  "at",
  "be",
  "by",
  "city",
  "do",
  "for",
  "in",
  "is",
  "it",
  "no",
  "of",
  "on",
  "or",
  "so",
  "the",
  "to",
  "was",
  "who",
]);

/** One first syllable: `Ta`, `Bren`, `Stol`. */
function syllable(rng: Rng): string {
  return rng.pick(ONSETS) + rng.pick(VOWELS) + rng.pick(MIDDLES);
}

/** One closing syllable: `vik`, `dor`, `ma`. */
function closing(rng: Rng): string {
  return rng.pick(SECOND_ONSETS) + rng.pick(VOWELS) + rng.pick(CODAS);
}

function capitalize(word: string): string {
  return word[0].toUpperCase() + word.slice(1);
}

/** Draws `count` distinct made-up words (capitalized) not in `taken`, adding them to `taken`. */
function drawWords(rng: Rng, count: number, taken: Set<string>, ending?: readonly string[]) {
  const out: string[] = [];
  while (out.length < count) {
    const stem = syllable(rng) + (ending ? rng.pick(ending) : closing(rng));
    const word = stem.toLowerCase();
    if (word.length < 4 || word.length > 10 || taken.has(word) || RESERVED.has(word)) continue;
    taken.add(word);
    out.push(capitalize(word));
  }
  return out;
}

/** Entity counts per kind. */
export const WORLD_SIZES: Readonly<Record<EntityKind, number>> = {
  country: 20,
  city: 120,
  person: 900,
  company: 160,
  novel: 200,
  film: 200,
};

/** Distinct two-part names `${a} ${b}` from the pools, in random order. */
function pairNames(rng: Rng, first: readonly string[], second: readonly string[], n: number) {
  const all = first.flatMap((a) => second.map((b) => `${a} ${b}`));
  return rng.sample(all, n);
}

function generateWorld(): World {
  const rng = new Rng(WORLD_SEED);
  const taken = new Set<string>();
  const countryNames = drawWords(rng, WORLD_SIZES.country, taken, COUNTRY_ENDINGS);
  const cityNames = drawWords(rng, WORLD_SIZES.city, taken, CITY_ENDINGS);
  const firstNames = drawWords(rng, 48, taken);
  const surnames = drawWords(rng, 64, taken);
  const companyStems = drawWords(rng, 80, taken);
  const names: Record<EntityKind, string[]> = {
    country: countryNames,
    city: cityNames,
    person: pairNames(rng, firstNames, surnames, WORLD_SIZES.person),
    company: pairNames(rng, companyStems, COMPANY_KINDS, WORLD_SIZES.company),
    novel: pairNames(rng, NOVEL_WORDS.adjectives, NOVEL_WORDS.nouns, WORLD_SIZES.novel)
      .map((t) => `The ${t}`),
    film: pairNames(rng, FILM_WORDS.adjectives, FILM_WORDS.nouns, WORLD_SIZES.film),
  };
  const entities: Entity[] = [];
  const byKind = {} as Record<EntityKind, number[]>;
  for (const kind of Object.keys(WORLD_SIZES) as EntityKind[]) {
    byKind[kind] = names[kind].map((name) => {
      entities.push({ id: entities.length, kind, name });
      return entities.length - 1;
    });
  }
  const passages: Passage[] = [];
  const facts = new Map<string, Fact>();
  const name = (id: number) => entities[id].name;
  /** Adds a passage about `subject` stating `stated` facts ([relation, object id or literal]). */
  const write = (subject: number, text: string, stated: [Relation, number | string][]) => {
    const passage = passages.length;
    passages.push({ id: passage, text, subject });
    for (const [relation, object] of stated) {
      const isEntity = typeof object === "number";
      facts.set(`${subject}/${relation}`, {
        relation,
        subject,
        object: isEntity ? object : null,
        value: isEntity ? name(object) : object,
        passage,
      });
    }
  };
  const { country, city, person, company, novel, film } = byKind;
  // Cities: 6 per country, the first of each country its capital.
  const countryOf = city.map((_, i) => country[i % country.length]);
  city.forEach((c, i) => {
    write(c, `${name(c)} is a city in ${name(countryOf[i])}.`, [["located_in", countryOf[i]]]);
  });
  country.forEach((k, i) => {
    write(k, `The capital of ${name(k)} is ${name(city[i])}.`, [["capital", city[i]]]);
  });
  for (const p of person) {
    const place = rng.pick(city), year = String(rng.range(1900, 1995));
    write(p, `${name(p)} was born in ${name(place)} in ${year}.`, [
      ["born_in", place],
      ["birth_year", year],
    ]);
    const job = rng.pick(OCCUPATIONS), employer = rng.pick(company);
    write(
      p,
      `${name(p)} works as ${/^[aeiou]/.test(job) ? "an" : "a"} ${job} at ${name(employer)}.`,
      [
        ["occupation", job],
        ["employer", employer],
      ],
    );
    let mentor = rng.pick(person);
    while (mentor === p) mentor = rng.pick(person);
    write(p, `${name(p)} studied under ${name(mentor)}.`, [["mentor", mentor]]);
  }
  for (const c of company) {
    const year = String(rng.range(1850, 2015)), founder = rng.pick(person);
    write(c, `${name(c)} was founded in ${year} by ${name(founder)}.`, [
      ["founding_year", year],
      ["founded_by", founder],
    ]);
    const hq = rng.pick(city);
    write(c, `${name(c)} is headquartered in ${name(hq)}.`, [["headquarters", hq]]);
  }
  for (const n of novel) {
    const author = rng.pick(person), year = String(rng.range(1900, 2020));
    write(n, `${name(n)} is a novel written by ${name(author)} and published in ${year}.`, [
      ["author", author],
      ["publication_year", year],
    ]);
  }
  for (const f of film) {
    const director = rng.pick(person), year = String(rng.range(1930, 2022));
    write(f, `${name(f)} is a film directed by ${name(director)} and released in ${year}.`, [
      ["director", director],
      ["release_year", year],
    ]);
  }
  return { entities, passages, facts, byKind };
}

/** The world every task asks about (generated once, from {@link WORLD_SEED}). */
export const WORLD: World = generateWorld();

/**
 * The fact `relation(subject)`.
 * @throws Error when the subject has no such relation (a programming error: callers pick
 *   relations by the subject's kind).
 */
export function factOf(subject: number, relation: Relation): Fact {
  const fact = WORLD.facts.get(`${subject}/${relation}`);
  if (fact === undefined) {
    throw new Error(
      `Cannot find a fact as ${relation} must be a relation of ${
        WORLD.entities[subject]?.name
      }: current subject kind is ${WORLD.entities[subject]?.kind}`,
    );
  }
  return fact;
}
