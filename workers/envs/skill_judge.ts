/**
 * Judging a hindsight skill against an environment's reference analyzer: is it **well-formed**
 * (a sentence the reference analyzer's grammar can produce: one of its skill templates with every
 * slot filled by a legal value), **truthful** (every fact it states holds for the trajectory) and
 * a **reference match** (the very skill the reference analyzer writes for the same trajectory)?
 * Built-in environments describe their grammar as {@link SkillTemplate}s; the skill metrics of the
 * trainer (workers/seed/signal_metrics.ts) count the three shares per step.
 *
 * Truthful is judged against the environment's list of true skills of the trajectory
 * ({@link judgeAgainstTrueSkills}): `household` lists one failure skill per mistake the replay
 * shows (the reference writes only the first) and compares lists of places as sets; the other
 * environments list the reference skill only ({@link judgeWithGrammar}), so there truthful is a
 * reference match.
 *
 * All tests compare {@link normalizeSkillText} forms, so case, whitespace and sentence
 * punctuation (`.`, `,`, `;`, `:`, quotes) do not matter, while the symbols that carry meaning in
 * some environment (`+ - * / ( ) = [ ]`, formulas and `click[…]`) do.
 */

/** The verdict on one skill (see module doc). */
export interface SkillJudgement {
  /** The reference analyzer's grammar accepts the skill (a template with legal slot values). */
  wellFormed: boolean;
  /**
   * Well-formed, and every fact the skill states holds for the trajectory: it is (normalised, up
   * to the order of set-valued slots) one of the environment's true skills of the trajectory.
   */
  truthful: boolean;
  /**
   * Well-formed, and the skill equals the reference analysis' skill of the same trajectory
   * (normalised): the former meaning of `truthful`, kept so earlier measurements compare.
   */
  matchesReference: boolean;
}

/** Symbols kept by {@link normalizeSkillText} (they carry meaning in formulas and actions). */
const KEPT_SYMBOLS = /[+\-*/()=[\]]/g;

/**
 * The comparison form of a skill: lowercase; each of `+ - * / ( ) = [ ]` a word of its own; every
 * other character that is not a letter or digit (sentence punctuation, quotes) a space;
 * whitespace collapsed and trimmed. E.g. `"Push it UP; then (10+2)!"` →
 * `"push it up then ( 10 + 2 )"`.
 */
export function normalizeSkillText(text: string): string {
  return text.toLowerCase()
    .replace(KEPT_SYMBOLS, " $& ")
    .replace(/[^\p{L}\p{N}\s+\-*/()=[\]]/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** Escapes `text` for use inside a regular expression. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * A regex alternation (source, non-capturing) of literal `values` in normalised form, longest
 * first. E.g. `["x-large", "red"]` → `(?:x - large|red)`.
 */
export function alternation(values: Iterable<string>): string {
  const unique = [...new Set([...values].map(normalizeSkillText))].filter((v) => v !== "");
  unique.sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
  return `(?:${unique.map(escapeRegExp).join("|")})`;
}

/**
 * One skill template: text with `{slot}` markers (slot names: lowercase letters and digits) and
 * the regex source each slot accepts, written against normalised text (see
 * {@link normalizeSkillText}). A slot that occurs twice must hold the same value both times (the
 * second occurrence is a back-reference); a slot pattern may itself define named groups
 * `(?<name>…)`, and a later `{name}` then repeats that group's value.
 */
export interface SkillTemplate {
  text: string;
  slots?: Readonly<Record<string, string>>;
}

/** Sentinel that survives normalisation (letters and digits only, unlikely in any skill). */
const SLOT_SENTINEL = (name: string) => `qqslot${name}qq`;

/**
 * Compiles templates into matchers of normalised skills (whole-string match), one per template.
 * Throws `RangeError` when a template uses a slot that has no pattern and is no named group of
 * another slot's pattern.
 */
export function compileSkillGrammar(templates: readonly SkillTemplate[]): RegExp[] {
  return templates.map((template) => {
    const slots = template.slots ?? {};
    const groups = new Set(
      Object.values(slots).flatMap((p) =>
        [...p.matchAll(/\(\?<([A-Za-z0-9]+)>/g)].map((m) => m[1])
      ),
    );
    const marked = template.text.replace(/\{([a-z0-9]+)\}/g, (_, name: string) => {
      if (!(name in slots) && !groups.has(name)) {
        throw new RangeError(
          `Cannot compile skill template as slot {${name}} must have a pattern: current template is ${template.text}`,
        );
      }
      return SLOT_SENTINEL(name);
    });
    const defined = new Set<string>();
    const source = escapeRegExp(normalizeSkillText(marked)).replace(
      /qqslot([a-z0-9]+?)qq/g,
      (_, name: string) => {
        if (defined.has(name)) return `\\k<${name}>`;
        defined.add(name);
        const pattern = slots[name];
        for (const m of pattern.matchAll(/\(\?<([A-Za-z0-9]+)>/g)) defined.add(m[1]);
        return `(?<${name}>${pattern})`;
      },
    );
    return new RegExp(`^${source}$`);
  });
}

/**
 * A regular pattern of literal skill text, for decoding skills under the reference analyzer's
 * grammar (structured generation; compiled by workers/model/text_pattern.ts, whose
 * `TextPattern` has this shape): a string is itself; `seq` its parts in order; `oneOf` one
 * alternative; `repeat` the item `min` (0 or 1, default 1) or more times with `separator`
 * between consecutive items. Unlike {@link SkillTemplate}s it is written against the literal
 * text (case and punctuation as the analyzer writes them), so every sentence it admits is one
 * the analyzer could write — and one the grammar judges well-formed.
 */
export type SkillPattern =
  | string
  | { readonly seq: readonly SkillPattern[] }
  | { readonly oneOf: readonly SkillPattern[] }
  | {
    readonly repeat: SkillPattern;
    readonly min?: 0 | 1;
    readonly separator?: SkillPattern;
  };

/**
 * An environment's skill sentences split by the trajectory's outcome, as its reference analyzer
 * writes them (the paper's analyzer instruction: for a success the workflow that worked, for a
 * failure the mistake and how to avoid it). The analyzer of a won trajectory decodes under `won`,
 * of a lost one under `lost`.
 */
export interface SkillPatterns {
  readonly won: SkillPattern;
  readonly lost: SkillPattern;
}

/**
 * The {@link SkillPattern} of one literal template: `text` with each `{slot}` replaced by
 * `slots[slot]` (a literal marker `{x}` without an entry stays literal text).
 * E.g. `templatePattern("push {dir}.", {dir: {oneOf: ["up", "down"]}})` →
 * `{seq: ["push ", {oneOf: ["up", "down"]}, "."]}`.
 */
export function templatePattern(
  text: string,
  slots: Readonly<Record<string, SkillPattern>> = {},
): SkillPattern {
  const parts: SkillPattern[] = [];
  let literal = "";
  for (const piece of text.split(/(\{[a-z0-9]+\})/)) {
    const slot = /^\{([a-z0-9]+)\}$/.exec(piece)?.[1];
    if (slot !== undefined && slot in slots) {
      if (literal) parts.push(literal);
      literal = "";
      parts.push(slots[slot]);
    } else literal += piece;
  }
  if (literal) parts.push(literal);
  return { seq: parts };
}

/** True when the normalised `skill` matches one of the compiled templates. */
export function matchesSkillGrammar(grammar: readonly RegExp[], skill: string): boolean {
  const text = normalizeSkillText(skill);
  return text !== "" && grammar.some((re) => re.test(text));
}

/**
 * Judges `skill` against `grammar` and the reference skill of the same trajectory: well-formed
 * when the grammar accepts it; truthful and a reference match when it is well-formed and its
 * normalised text equals the reference skill's (same template, same slot values).
 */
export function judgeWithGrammar(
  grammar: readonly RegExp[],
  skill: string,
  referenceSkill: string,
): SkillJudgement {
  return judgeAgainstTrueSkills(grammar, skill, { trueSkills: [referenceSkill] });
}

/** What {@link judgeAgainstTrueSkills} compares a skill with. */
export interface TrueSkills {
  /** The skills that state only true things of the trajectory; the first is the reference's. */
  trueSkills: readonly string[];
  /**
   * Slots whose value is a set written as a list (slot name → separator in normalised form,
   * e.g. `{where: " and "}`): their items are compared in any order. Default: none.
   */
  setSlots?: Readonly<Record<string, string>>;
}

/**
 * Judges `skill` against `grammar` and the true skills of its trajectory: well-formed when the
 * grammar accepts it; truthful when it is well-formed and its {@link canonicalSkillText} equals
 * that of one of `truth.trueSkills`; a reference match when its normalised text equals
 * `truth.trueSkills[0]`'s. Throws `RangeError` when `truth.trueSkills` is empty.
 */
export function judgeAgainstTrueSkills(
  grammar: readonly RegExp[],
  skill: string,
  truth: TrueSkills,
): SkillJudgement {
  const [reference] = truth.trueSkills;
  if (reference === undefined) {
    throw new RangeError(
      "Cannot judge a skill as truth.trueSkills must name at least the reference skill: current value is []",
    );
  }
  const wellFormed = matchesSkillGrammar(grammar, skill);
  const matchesReference = wellFormed &&
    normalizeSkillText(skill) === normalizeSkillText(reference);
  let truthful = matchesReference;
  if (wellFormed && !truthful) {
    const setSlots = truth.setSlots ?? {};
    const canonical = canonicalSkillText(grammar, skill, setSlots);
    truthful = truth.trueSkills.some((t) => canonicalSkillText(grammar, t, setSlots) === canonical);
  }
  return { wellFormed, truthful, matchesReference };
}

/** The grammar's matchers with match indices (flag `d`), built once per grammar. */
const indexedGrammars = new WeakMap<readonly RegExp[], RegExp[]>();

/**
 * The comparison form of `skill` up to the order of list items: its normalised text, where the
 * first template of `grammar` that matches it has each slot of `setSlots` (slot name →
 * separator) rewritten with its items sorted. E.g. with `{where: " and "}`, `"… in apple 2 in
 * cabinet 3 and apple 1 in fridge 1 …"` → `"… in apple 1 in fridge 1 and apple 2 in cabinet 3
 * …"`. A skill no template matches keeps its normalised text.
 */
export function canonicalSkillText(
  grammar: readonly RegExp[],
  skill: string,
  setSlots: Readonly<Record<string, string>>,
): string {
  const text = normalizeSkillText(skill);
  const names = Object.keys(setSlots);
  if (names.length === 0) return text;
  let indexed = indexedGrammars.get(grammar);
  if (indexed === undefined) {
    indexed = grammar.map((re) => new RegExp(re.source, "d"));
    indexedGrammars.set(grammar, indexed);
  }
  for (const re of indexed) {
    const match = re.exec(text);
    if (match === null) continue;
    const groups = match.indices?.groups ?? {};
    const spans = names.flatMap((name) => {
      const span = groups[name];
      return span === undefined ? [] : [{ span, separator: setSlots[name] }];
    }).sort((a, b) => b.span[0] - a.span[0]);
    let out = text;
    for (const { span: [start, end], separator } of spans) {
      const items = out.slice(start, end).split(separator).sort();
      out = out.slice(0, start) + items.join(separator) + out.slice(end);
    }
    return out;
  }
  return text;
}
