/**
 * The scripted search-QA expert: searches hop by hop with the question's expert queries (the
 * subject's name and the relation's keyword, each of which ranks its evidence passage first; see
 * questions.ts), then answers with the gold answer. Single-hop questions take 2 turns, bridge and
 * comparison questions 3.
 */
import type { Expert, Observation } from "../types.ts";
import type { Question } from "./questions.ts";

/** Expert for one question; one instance per episode. */
export class SearchExpert implements Expert {
  readonly question: Question;
  #turn = 0;

  /** @param question the task's question, with its hops and answer. */
  constructor(question: Question) {
    this.question = question;
  }

  /** The next action: the next hop's search, then the answer. */
  act(_observation: Observation): string {
    const hop = this.question.hops[this.#turn++];
    return hop === undefined
      ? `<answer>${this.question.answer}</answer>`
      : `<search>${hop.query}</search>`;
  }
}
