/**
 * The thread of a {@link SamplerThreads} (sampler_threads.ts): draws one token per row of the
 * logits it is sent, each with its row's random stream, and sends back the tokens and the streams'
 * new states. The same `sampleToken` as the calling thread, so the draws are the same.
 */
import { Rng, type RngState, type SampleOptions, sampleToken } from "./sampling.ts";

/** A request: `rows` rows of `vocab` logits, one stream state per row. */
export interface SamplerRequest {
  logits: Float32Array;
  vocab: number;
  states: RngState[];
  options: SampleOptions;
}

/** The answer: a token per row and each row's stream after its draw. */
export interface SamplerAnswer {
  tokens: number[];
  states: RngState[];
}

const scope = self as unknown as {
  onmessage: (e: MessageEvent<SamplerRequest>) => void;
  postMessage: (answer: SamplerAnswer) => void;
};
scope.onmessage = ({ data }) => {
  const { logits, vocab, states, options } = data;
  const answer: SamplerAnswer = { tokens: [], states: [] };
  states.forEach((state, k) => {
    const rng = Rng.fromState(state);
    answer.tokens.push(sampleToken(logits.subarray(k * vocab, (k + 1) * vocab), options, rng));
    answer.states.push(rng.state());
  });
  scope.postMessage(answer);
};
