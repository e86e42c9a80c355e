/**
 * The search-QA reference analyzer: replays a trajectory in a fresh episode of its task and
 * reports which search showed which fact of the question's evidence.
 *
 * On success the skill is the workflow with the decisive searches (the ones that first showed
 * each needed fact) and, for a bridge question, the bridge entity. On failure it names the core
 * mistake, most important first: never answering; answering before the bridge entity was found;
 * answering after the bridge without searching its fact; answering without the evidence; misreading
 * the evidence; and, when a search was the question verbatim and showed none of the needed
 * passages, that verbatim search as the cause. The skill then gives the expert's plan.
 */
import type { SkillAnalysis, Trajectory } from "../types.ts";
import { normalizeAnswer } from "./answer.ts";
import { type AnswerScore, parseSearchAction, type SearchEpisode } from "./episode.ts";
import { type Question, RELATIONS, statementOf } from "./questions.ts";
import { WORLD } from "./world.ts";

/** One search of a replay. */
export interface ReplayedSearch {
  /** 0-based step. */
  step: number;
  query: string;
  /** Passage ids shown. */
  retrieved: number[];
  /** True when the query is the question itself (equal after answer normalisation). */
  verbatim: boolean;
}

/** What a replay shows. */
export interface SearchFacts {
  searches: ReplayedSearch[];
  /** Per hop of the question: the step whose search first showed its evidence, or null. */
  evidenceStep: (number | null)[];
  /** The answer given and its step, or null. */
  answer: (AnswerScore & { step: number }) | null;
  invalid: number;
  steps: number;
}

/** Replays `actions` on `episode` from the start. */
export function replaySearch(episode: SearchEpisode, actions: readonly string[]): SearchFacts {
  const question = episode.question;
  const facts: SearchFacts = {
    searches: [],
    evidenceStep: question.hops.map(() => null),
    answer: null,
    invalid: 0,
    steps: 0,
  };
  episode.reset();
  for (const text of actions) {
    const step = facts.steps++;
    const result = episode.step(text);
    if (!result.valid) facts.invalid++;
    const action = result.valid ? parseSearchAction(text) : null;
    if (action?.verb === "search") {
      const query = action.arg;
      const retrieved = result.info.retrieved as number[];
      facts.searches.push({
        step,
        query,
        retrieved,
        verbatim: normalizeAnswer(query) === normalizeAnswer(question.text),
      });
      question.hops.forEach((hop, h) => {
        if (facts.evidenceStep[h] === null && retrieved.includes(hop.fact.passage)) {
          facts.evidenceStep[h] = step;
        }
      });
    }
    if (action?.verb === "answer") {
      facts.answer = {
        step,
        text: action.arg,
        exactMatch: result.info.exact_match as boolean,
        f1: result.info.f1 as number,
      };
    }
    if (result.done) break;
  }
  return facts;
}

const name = (id: number) => WORLD.entities[id].name;
const stepsText = (n: number) => `${n} ${n === 1 ? "step" : "steps"}`;

/** `the author of The Silent Harbor`: the bridge phrase of a bridge question. */
function bridgePhrase(question: Question): string {
  const first = question.hops[0];
  return RELATIONS[first.relation].phrase!.replace("{s}", name(first.subject));
}

/** The fact of hop `i` as analyses state it (a bridge's first hop names the bridge). */
function hopStatement(question: Question, i: number): string {
  const hop = question.hops[i];
  return question.family === "bridge" && i === 0
    ? `${bridgePhrase(question)} is ${name(question.bridge!)}`
    : statementOf(hop.fact);
}

/** The expert's plan with this question's names: what to do instead. */
export function searchPlan(question: Question): string {
  const [a, b] = question.hops;
  if (question.family === "single_hop") {
    return `search "${a.query}", which shows ${hopStatement(question, 0)}, and answer ` +
      question.answer;
  }
  if (question.family === "bridge") {
    return `first search "${a.query}" to find the bridge entity (${hopStatement(question, 0)}), ` +
      `then search "${b.query}", which shows ${hopStatement(question, 1)}, and answer ` +
      question.answer;
  }
  return `search "${a.query}" and "${b.query}" separately, compare ${a.fact.value} with ` +
    `${b.fact.value} and answer the earlier one, ${question.answer}`;
}

/** `"q" showed …` (or `"q" showed nothing needed`) per search, for summaries. */
function searchLog(question: Question, facts: SearchFacts): string[] {
  return facts.searches.map((s) => {
    const shown = question.hops.map((_, i) => i).filter((i) => facts.evidenceStep[i] === s.step)
      .map((i) => hopStatement(question, i));
    return `"${s.query}" showed ${shown.length > 0 ? shown.join(" and ") : "nothing needed"}`;
  });
}

/** The decisive searches of a success: per hop, the query that first showed its evidence. */
function decisiveSearches(question: Question, facts: SearchFacts): string {
  const parts = question.hops.map((_, i) => {
    const query = facts.searches.find((s) => s.step === facts.evidenceStep[i])!.query;
    return `"${query}" showed ${hopStatement(question, i)}`;
  });
  return parts.join(", then ");
}

/** The workflow skill of a won episode. */
function successSkill(question: Question, facts: SearchFacts): string {
  const decisive = decisiveSearches(question, facts);
  if (question.family === "single_hop") {
    const keyword = RELATIONS[question.hops[0].relation].keyword;
    return `Search the name in the question with the word ${keyword}, then answer what the ` +
      `passage states: ${decisive}; answer ${question.answer}.`;
  }
  if (question.family === "bridge") {
    return `Find the bridge entity first, then search it: ${decisive}; answer ` +
      `${question.answer} alone.`;
  }
  return `Search the two names separately and compare the years: ${decisive}; answer the ` +
    `earlier, ${question.answer}.`;
}

/** The core mistake of a lost episode (see the module comment for the order). */
function coreMistake(question: Question, facts: SearchFacts): string {
  const answer = facts.answer;
  const before = (i: number) =>
    facts.evidenceStep[i] !== null && (answer === null || facts.evidenceStep[i]! < answer.step);
  const missing = question.hops.map((_, i) => i).filter((i) => !before(i));
  const missingFacts = missing.map((i) => hopStatement(question, i)).join(" and ");
  let core: string;
  if (answer === null) {
    if (facts.searches.length === 0) core = `never searched or answered in ${facts.steps} turns`;
    else if (missing.length === 0) {
      core = `found the answer ${question.answer} but never answered before the turn limit`;
    } else core = `never answered before the turn limit, and no search showed ${missingFacts}`;
  } else {
    const said = `answered "${answer.text}"`;
    if (question.family === "bridge" && missing.includes(0)) {
      core = `${said} before the bridge entity was found: no search showed ` +
        hopStatement(question, 0);
    } else if (question.family === "bridge" && missing.includes(1)) {
      core = `found the bridge entity ${name(question.bridge!)} but ${said} before a search ` +
        `showed ${missingFacts}`;
    } else if (missing.length > 0) {
      core = `${said} before a search showed ${missingFacts}`;
    } else {
      core = `${said} although the passages showed ${
        question.hops.map((_, i) => hopStatement(question, i)).join(" and ")
      }, so the answer is ${question.answer}`;
    }
  }
  const wasted = facts.searches.find((s) =>
    s.verbatim && !question.hops.some((h) => s.retrieved.includes(h.fact.passage))
  );
  if (wasted !== undefined && missing.length > 0) {
    return `searched the question verbatim ("${wasted.query}"), which showed none of the needed ` +
      `passages, then ${core}`;
  }
  return core;
}

/** The reference analysis of a finished search-QA trajectory. */
export function analyzeSearch(trajectory: Trajectory, episode: SearchEpisode): SkillAnalysis {
  const question = episode.question;
  const facts = replaySearch(episode, trajectory.steps.map((s) => s.action));
  const log = searchLog(question, facts);
  const answer = facts.answer;
  if (answer?.exactMatch) {
    const done = [...log, `answered "${answer.text}"`].join("; ");
    const unsupported = question.hops.map((_, i) => i).filter((i) =>
      facts.evidenceStep[i] === null
    );
    if (unsupported.length > 0) {
      return {
        episode_summary: `Success in ${
          stepsText(facts.steps)
        } by a guess: ${done}; no search showed ${
          unsupported.map((i) => hopStatement(question, i)).join(" and ")
        }.`,
        episode_skill: `Answer only what the passages show: ${searchPlan(question)}.`,
      };
    }
    return {
      episode_summary: `Success in ${stepsText(facts.steps)}: ${done}.`,
      episode_skill: successSkill(question, facts),
    };
  }
  const mistake = coreMistake(question, facts);
  const signs: string[] = [];
  if (facts.invalid > 0) signs.push(`${facts.invalid} invalid actions`);
  const queries = facts.searches.map((s) => normalizeAnswer(s.query));
  const repeated = queries.length - new Set(queries).size;
  if (repeated > 0) signs.push(`${repeated} repeated searches`);
  const warning = signs.length > 0 ? ` Warning signs: ${signs.join(", ")}.` : "";
  const answered = answer === null
    ? []
    : [`answered "${answer.text}" (score ${Math.round(answer.f1 * 100)})`];
  const steps = [...log, ...answered];
  return {
    episode_summary: `Failure after ${stepsText(facts.steps)}: ${
      steps.length > 0 ? steps.join("; ") : "no valid action"
    }.${warning}`,
    episode_skill: `Avoid this mistake: ${mistake}. Instead, ${searchPlan(question)}.`,
  };
}

/** Fixed wording of analyses (for the vocabulary). */
export const ANALYZER_PHRASES: readonly string[] = [
  'Success in step steps: "" showed nothing needed and ; answered "" by a guess: no search showed',
  "Failure after steps: no valid action. Warning signs: invalid actions, repeated searches.",
  "(score ) Avoid this mistake: . Instead, Answer only what the passages show: .",
  'search "", which shows , and answer first search "" to find the bridge entity ( ),',
  'then search "", which shows , and answer "" and "" separately, compare with and',
  "answer the earlier one, is",
  "Search the name in the question with the word , then answer what the passage states: ;",
  "Find the bridge entity first, then search it: , then ; answer alone.",
  "Search the two names separately and compare the years: ; answer the earlier, .",
  "never searched or answered in turns found the answer but never answered before the turn",
  "limit never answered before the turn limit, and no search showed",
  "answered before the bridge entity was found: no search showed found the bridge entity but",
  "before a search showed although the passages showed , so the answer is",
  'searched the question verbatim (""), which showed none of the needed passages, then',
];
