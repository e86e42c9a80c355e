import assert from "node:assert/strict";
import { TOKENIZER_PROBE_TEXTS } from "../../../workers/model/upload_check.ts";
import {
  TOKENIZER_PROBE_PATH,
  tokenizerProbeText,
} from "../../../workers/seed/run/write_tokenizer_probe.ts";

Deno.test("the committed tokenizer_probe.json holds the texts jobs show a model now (else: deno task gen:tokenizer-probe)", async () => {
  const committed = await Deno.readTextFile(TOKENIZER_PROBE_PATH);
  assert.equal(
    committed,
    await tokenizerProbeText(),
    "workers/model/tokenizer_probe.json is stale: run `deno task gen:tokenizer-probe` and commit it",
  );
  assert.deepEqual(TOKENIZER_PROBE_TEXTS, JSON.parse(committed).texts);
  for (const id of ["sokoban", "household", "webshop", "ezpoints", "search"]) {
    assert.ok(TOKENIZER_PROBE_TEXTS.some((t) => t.source === `${id}: first turn prompt`), id);
  }
});
