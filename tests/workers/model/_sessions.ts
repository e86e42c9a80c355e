import type * as ort from "onnxruntime-node";
import { SessionCache } from "../../../workers/engine/mod.ts";

/** A session cache that counts the rows and the tokens (rows × columns) of `input_ids` run. */
export class CountingSessions extends SessionCache {
  rows = 0;
  tokens = 0;
  override async get(key: string, build: () => Uint8Array): Promise<ort.InferenceSession> {
    const session = await super.get(key, build);
    const run = session.run.bind(session);
    // deno-lint-ignore no-explicit-any
    (session as any).run = (feeds: Record<string, ort.Tensor>, ...rest: any[]) => {
      const dims = feeds.input_ids?.dims ?? [0, 0];
      this.rows += Number(dims[0]);
      this.tokens += Number(dims[0]) * Number(dims[1] ?? 1);
      return run(feeds, ...rest);
    };
    return session;
  }
}
