/**
 * Talking to the API from the page: the API key lives in `sessionStorage` (this tab only; never in
 * a URL or a cookie) and goes in the `Authorization` header of every `/v1` request. Live views
 * read the SSE routes with `fetch` (an `EventSource` cannot send the header) and reconnect with
 * `Last-Event-ID`.
 */

const KEY = "seed.apiKey";

/** The signed-in API key, or null. */
export function apiKey() {
  return sessionStorage.getItem(KEY);
}

/** @param {string} key */
export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

/**
 * Where sign-in sends the user back to: `next` when it is one of this page's own locations (a
 * fragment `#/…`, other than sign-in itself), else the job list. Anything else — a URL, `//host`,
 * `javascript:` — is refused, so a link cannot use sign-in to leave this origin.
 * @param {string | null} next
 */
export function safeNext(next) {
  if (typeof next !== "string" || next.length > 2048) return "#/jobs";
  if (!/^#\/[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*$/.test(next)) return "#/jobs";
  if (/^#\/signin(\?|$)/.test(next)) return "#/jobs";
  return next;
}

/** The sign-in location that returns to the current one afterwards. */
export function signInHash() {
  const here = location.hash;
  if (!here || here === "#" || here.startsWith("#/signin")) return "#/signin";
  return `#/signin?next=${encodeURIComponent(here)}`;
}

/** A non-2xx answer: `problem` is the problem+json body (`detail`, `errors[]`). */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {{detail?: string, title?: string, errors?: {path: string, message: string}[]}} problem
   */
  constructor(status, problem) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.problem = problem;
  }
}

/**
 * A fetch of `path` with the key. A 401 signs out and goes to the sign-in page.
 * @param {string} path
 * @param {RequestInit & {json?: unknown}} [init]
 * @returns {Promise<Response>}
 */
export async function request(path, init = {}) {
  const headers = new Headers(init.headers);
  const key = apiKey();
  if (key) headers.set("authorization", `Bearer ${key}`);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers.set("content-type", "application/json");
  }
  const res = await fetch(path, { ...init, headers, body });
  if (res.ok) return res;
  let problem;
  try {
    problem = await res.json();
  } catch {
    problem = { detail: `HTTP ${res.status}` };
  }
  if (res.status === 401) {
    signOut();
    if (!location.hash.startsWith("#/signin")) location.hash = signInHash();
  }
  throw new ApiError(res.status, problem);
}

/**
 * JSON of `path`.
 * @param {string} path
 * @param {RequestInit & {json?: unknown}} [init]
 */
export async function api(path, init) {
  return await (await request(path, init)).json();
}

/**
 * Saves the body of `path` as a file named `filename` (the request needs the key, so a plain link
 * cannot fetch it).
 * @param {string} path
 * @param {string} filename
 */
export async function download(path, filename) {
  const blob = await (await request(path)).blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * @typedef {{event: string, data: string, id?: string}} SseMessage
 */

/**
 * Reads an SSE route until `signal` aborts or the server sends `event: end`; reconnects after a
 * second (resuming with `Last-Event-ID`) when the connection drops.
 * @param {string} path
 * @param {{signal: AbortSignal, onMessage: (m: SseMessage) => void, onState?: (s: string) => void}}
 *   options
 */
export async function follow(path, options) {
  const { signal, onMessage } = options;
  let lastId;
  while (!signal.aborted) {
    let ended = false;
    try {
      const headers = { accept: "text/event-stream" };
      if (lastId !== undefined) headers["last-event-id"] = lastId;
      const res = await request(path, { headers, signal });
      options.onState?.("live");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const msg = parseBlock(block);
          if (!msg) continue;
          if (msg.id !== undefined) lastId = msg.id;
          if (msg.event === "end") ended = true;
          onMessage(msg);
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status < 500) throw error;
    }
    if (ended || signal.aborted) return;
    options.onState?.("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * One SSE message block → message (null for comments and `retry:` lines only).
 * @param {string} block
 * @returns {SseMessage | null}
 */
function parseBlock(block) {
  let event = "message";
  let id;
  const data = [];
  let any = false;
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value, any = true;
    else if (field === "data") data.push(value), any = true;
    else if (field === "id") id = value;
  }
  return any ? { event, data: data.join("\n"), id } : null;
}
