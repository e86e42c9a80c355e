/**
 * What each token id writes: the UTF-8 bytes a token adds to a decoded text, for structured
 * generation (constrained_decoding.ts). A token may hold part of a character (byte-level BPE
 * splits multi-byte characters), so the unit is the byte, not the character.
 */
import { bytesToUnicode, type Tokenizer } from "./tokenizer.ts";

const BYTE_OF_CHAR = new Map([...bytesToUnicode()].map(([b, c]) => [c, b]));
const utf8 = new TextEncoder();
const cache = new WeakMap<Tokenizer, (Uint8Array | null)[]>();

/** True when `decoder` (a tokenizer.json decoder) is ByteLevel or a Sequence holding one. */
function isByteLevel(decoder: unknown): boolean {
  if (!decoder || typeof decoder !== "object") return false;
  const d = decoder as { type?: unknown; decoders?: unknown };
  if (d.type === "ByteLevel") return true;
  return d.type === "Sequence" && Array.isArray(d.decoders) && d.decoders.some(isByteLevel);
}

/** Ids of the tokenizer's special added tokens (dropped when decoding with skipSpecialTokens). */
function specialIds(tokenizer: Tokenizer): Set<number> {
  const added = tokenizer.files.tokenizerJson.added_tokens;
  const ids = new Set<number>();
  if (Array.isArray(added)) {
    for (const t of added as { id?: unknown; special?: unknown }[]) {
      if (t?.special === true && typeof t.id === "number") ids.add(t.id);
    }
  }
  return ids;
}

/**
 * The bytes each token id in [0, tokenizer.vocabSize) adds to `decode(ids, {skipSpecialTokens:
 * true})`, or null for a token that adds nothing or cannot be placed (special tokens, holes in
 * the vocabulary). Computed once per tokenizer (memoised).
 *
 * - ByteLevel decoders (GPT-2, Qwen, Llama 3, builtin): each character of the token string
 *   maps back to its byte (GPT-2's `bytes_to_unicode`); a token with a character outside that
 *   map (an added token) writes its string's UTF-8, as `tokenizers`' ByteLevel decoder does.
 *   Then `decode(ids)` is the UTF-8 decoding of the tokens' bytes concatenated, exactly.
 * - Other decoders (Metaspace, WordPiece): `<0xHH>` byte-fallback tokens write byte HH; any
 *   other token writes what it adds after an anchor token (`decode([a, id])` minus
 *   `decode([a])`, which keeps a word-start space), or null when that holds U+FFFD.
 */
export function tokenBytes(tokenizer: Tokenizer): (Uint8Array | null)[] {
  const hit = cache.get(tokenizer);
  if (hit) return hit;
  const special = specialIds(tokenizer);
  const json = tokenizer.files.tokenizerJson;
  const out: (Uint8Array | null)[] = new Array(tokenizer.vocabSize).fill(null);
  if (isByteLevel(json.decoder)) {
    for (let id = 0; id < tokenizer.vocabSize; id++) {
      const token = tokenizer.idToToken(id);
      if (token === undefined || token === "" || special.has(id)) continue;
      const chars = Array.from(token);
      const bytes = chars.map((c) => BYTE_OF_CHAR.get(c));
      out[id] = bytes.every((b) => b !== undefined)
        ? Uint8Array.from(bytes as number[])
        : utf8.encode(token);
    }
  } else {
    const byteFallback = (json.model as { byte_fallback?: unknown } | undefined)?.byte_fallback;
    const anchor = tokenizer.encode("a", { addSpecialTokens: false });
    const base = tokenizer.decode(anchor, { skipSpecialTokens: true });
    for (let id = 0; id < tokenizer.vocabSize; id++) {
      const token = tokenizer.idToToken(id);
      if (token === undefined || special.has(id)) continue;
      const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
      if (byte && byteFallback === true) {
        out[id] = Uint8Array.of(parseInt(byte[1], 16));
        continue;
      }
      const text = tokenizer.decode([...anchor, id], { skipSpecialTokens: true });
      if (!text.startsWith(base) || text.includes("\ufffd")) continue;
      const added = text.slice(base.length);
      if (added !== "") out[id] = utf8.encode(added);
    }
  }
  cache.set(tokenizer, out);
  return out;
}
