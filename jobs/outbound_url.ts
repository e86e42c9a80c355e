/**
 * Rules for URLs a user names and the service then contacts (workers/seed/README.md, "Outbound
 * URLs"): HTTP environments (workers/envs/http/client.ts) and the analyzer warm-up's LLM annotator
 * (`warmup.analyzer.annotator.base_url`) and rollout engines
 * (`rollout.engine.endpoints[i].base_url`). Shared by the API (checked at submit: a URL badly
 * written is a 400 naming the field, a host the deployment's rules refuse a 422) and the workers
 * (checked again before every request).
 *
 * Common to both:
 * - only `http:`/`https:` absolute URLs without credentials;
 * - the service's own endpoints (`DATABASE_URL`, `S3_ENDPOINT`, or the embedded database and
 *   store of `SEED_DATA_DIR`) are always refused, through every loopback name;
 * - names are compared as written (WHATWG URL parsing), not resolved.
 *
 * Environments are contacted only on an allowlist (`SEED_ENV_ALLOWED_HOSTS`, default loopback).
 * Annotators are usually public APIs, so {@link checkAnnotatorUrl} admits public hosts and refuses
 * internal ones (loopback, private, link-local and unique-local addresses, single-label and
 * `.internal`/`.local`/`.localhost` names) unless the operator lists them in
 * `SEED_ANNOTATOR_ALLOWED_HOSTS` (`host` or `host:port`, comma-separated).
 */

import { domainToUnicode } from "node:url";

/** Thrown when an outbound URL is refused; `field` names where it came from. */
export class OutboundUrlError extends Error {
  override name = "OutboundUrlError";
  readonly url: string;
  readonly field: string;
  /**
   * @param field what the URL is (e.g. `warmup.analyzer.annotator.base_url`); @param reason why.
   */
  constructor(field: string, url: string, reason: string) {
    super(`Cannot contact ${field} as ${reason}: current value is ${withoutPassword(url)}`);
    this.url = url;
    this.field = field;
  }
}

/** `url` with any password replaced by `***` (an error message must not repeat a credential). */
function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password === "") return url;
    u.password = "***";
    return u.href;
  } catch {
    return url.replace(/\/\/([^/@:]*):[^/@]*@/, "//$1:***@");
  }
}

/** Reads a process environment variable; undefined when unset, empty or not permitted. */
export function envVar(name: string): string | undefined {
  try {
    return Deno.env.get(name) || undefined;
  } catch {
    return undefined; // no --allow-env: treat as unset
  }
}

/** Comma-separated `host` / `host:port` entries of `variable`, lowercased; undefined when unset. */
export function hostListFromEnv(variable: string): string[] | undefined {
  const raw = envVar(variable);
  if (raw === undefined) return undefined;
  return raw.split(",").map((h) => h.trim().toLowerCase()).filter((h) => h !== "");
}

const DEFAULT_PORTS: Record<string, string> = {
  "http:": "80",
  "https:": "443",
  "postgres:": "5432",
  "postgresql:": "5432",
};

/** The URL's port, or its scheme's default port (undefined for unknown schemes). */
export function portOf(url: URL): string | undefined {
  return url.port !== "" ? url.port : DEFAULT_PORTS[url.protocol];
}

/**
 * True for a name of this machine's loopback interface as WHATWG URL parsing writes it:
 * `localhost`, `127.x.x.x` (also reached as `2130706433` or `0x7f000001`, which parse to
 * `127.0.0.1`), `[::1]`, an IPv4-mapped `[::ffff:7f…]`, and `0.0.0.0` / `[::]` (which connect
 * to loopback on Linux).
 */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || /^127\.\d+\.\d+\.\d+$/.test(host) || host === "[::1]" ||
    /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(host) || host === "0.0.0.0" ||
    host === "[::]";
}

/** IPv4 dotted quad → 32-bit number; undefined when `host` is not one. */
function ipv4(host: string): number | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return ((parts[0] << 24) >>> 0) + (parts[1] << 16) + (parts[2] << 8) + parts[3];
}

/**
 * IPv4 blocks that are not public (RFC 6890): this network, private, CGNAT, loopback, link-local.
 */
const INTERNAL_V4 = ([
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3], // multicast and reserved, up to 255.255.255.255
] as [string, number][]).map(([a, bits]) => [ipv4(a)!, bits] as const);

/**
 * The eight 16-bit groups of an IPv6 address as WHATWG URL parsing writes it (lowercase hex, `::`
 * for the longest zero run, an embedded IPv4 already turned into two groups); undefined when
 * `a` is not one.
 */
function ipv6Groups(a: string): number[] | undefined {
  const halves = a.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string) =>
    (part ? part.split(":") : []).map((x) => /^[0-9a-f]{1,4}$/.test(x) ? parseInt(x, 16) : NaN);
  const head = parse(halves[0]), tail = halves.length === 2 ? parse(halves[1]) : [];
  const fill = 8 - head.length - tail.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined;
  const groups = [...head, ...Array(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return groups.length === 8 && groups.every((x) => !Number.isNaN(x)) ? groups : undefined;
}

/**
 * True for a host (as WHATWG URL parsing writes it: IPv6 in brackets) that reaches this machine
 * or a private network: loopback names ({@link isLoopbackHost}), the IPv4 blocks of RFC 6890 that
 * are not public (10/8, 172.16/12, 192.168/16, 100.64/10, 169.254/16, …), IPv6 unspecified,
 * loopback, unique-local (fc00::/7), link-local (fe80::/10), site-local (fec0::/10), multicast,
 * and every form that embeds an internal IPv4 address (IPv4-compatible `[::127.0.0.1]`, mapped
 * `[::ffff:127.0.0.1]`, translated `[::ffff:0:127.0.0.1]`, NAT64 `[64:ff9b::127.0.0.1]`, 6to4),
 * and names without a dot or under `.localhost`, `.local`, `.internal`, `.lan`, `.home.arpa`
 * (resolved by internal DNS). Public names that resolve to internal addresses are not caught
 * here; the worker resolves them before connecting (workers/seed/annotator.ts).
 */
export function isInternalHost(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  if (isLoopbackHost(h)) return true;
  const v4 = ipv4(h);
  if (v4 !== undefined) {
    return INTERNAL_V4.some(([base, bits]) => (v4 >>> (32 - bits)) === (base >>> (32 - bits)));
  }
  if (h.startsWith("[")) {
    const g = ipv6Groups(h.slice(1, -1));
    if (!g) return true; // not an address we can read: refuse rather than guess
    const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
    const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
    // Forms that carry an IPv4 address in their last 32 bits, judged by that address:
    // IPv4-compatible ::a.b.c.d (incl. :: and ::1), mapped ::ffff:a.b.c.d, translated
    // ::ffff:0:a.b.c.d (RFC 2765), and NAT64 64:ff9b::a.b.c.d (RFC 6052).
    if (
      zeros(0, 6) || (zeros(0, 5) && g[5] === 0xffff) ||
      (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) ||
      (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6))
    ) {
      return (zeros(0, 8) || (zeros(0, 7) && g[7] === 1)) || isInternalHost(v4(g[6], g[7]));
    }
    if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return true; // local-use NAT64 (RFC 8215)
    if (g[0] === 0x2002) return isInternalHost(v4(g[1], g[2])); // 6to4 (RFC 3056)
    // Unique-local fc00::/7, link-local fe80::/10, site-local fec0::/10 (RFC 3879), multicast.
    return (g[0] & 0xfe00) === 0xfc00 || (g[0] & 0xffc0) === 0xfe80 ||
      (g[0] & 0xffc0) === 0xfec0 || (g[0] & 0xff00) === 0xff00;
  }
  return !h.includes(".") || /\.(localhost|local|internal|lan|home\.arpa)$/.test(h);
}

/**
 * Whether two URL hostnames reach the same machine for the deny list: equal, or both loopback
 * (a `DATABASE_URL` on `localhost:5432` must also deny `127.0.0.1:5432` and `[::1]:5432`).
 */
function sameHost(a: string, b: string): boolean {
  return a === b || (isLoopbackHost(a) && isLoopbackHost(b));
}

function readJsonPort(path: string): number | undefined {
  try {
    const port = JSON.parse(Deno.readTextFileSync(path))?.port;
    return Number.isInteger(port) && port > 0 && port < 65_536 ? port : undefined;
  } catch {
    return undefined; // absent, being written, or no --allow-read
  }
}

/**
 * The service's own endpoints from the process environment: `DATABASE_URL` and `S3_ENDPOINT`
 * when set; otherwise the embedded services of `SEED_DATA_DIR` (default `.seed`) that serve on
 * loopback, read from the files they publish their ports in (`pg.lock` of jobs/embedded/pglite.ts,
 * `s3.json` of jobs/embedded/local_s3.ts). Without these, a loopback allowlist would let a user's
 * URL reach the embedded database and the embedded (unauthenticated) object store.
 */
export function serviceUrlsFromEnv(): string[] {
  const urls: string[] = [];
  const dataDir = envVar("SEED_DATA_DIR") ?? ".seed";
  const database = envVar("DATABASE_URL");
  const s3 = envVar("S3_ENDPOINT");
  if (database) urls.push(database);
  else {
    const port = readJsonPort(`${dataDir}/pg.lock`);
    if (port) urls.push(`postgres://127.0.0.1:${port}/`);
  }
  if (s3) urls.push(s3);
  else {
    const port = readJsonPort(`${dataDir}/s3.json`);
    if (port) urls.push(`http://127.0.0.1:${port}/`);
  }
  return urls;
}

/** Whitespace and control characters (C0, space, C1, Unicode spaces, BOM). */
const SPACE_OR_CONTROL = String
  .raw`[\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]`;
const EDGE_SPACE = new RegExp(`^${SPACE_OR_CONTROL}|${SPACE_OR_CONTROL}$`);
const INNER_CONTROL = new RegExp(String.raw`[\u0000-\u001f\u007f-\u009f]`);

/**
 * Why `raw` is not a URL as a user must write one for the service to contact, or undefined when
 * it is: no whitespace or control character at either end and no control character (tab, line
 * break, …) inside — WHATWG URL parsing drops those silently, so the URL contacted would not be
 * the one written —, absolute, scheme `http` or `https`, no credentials. These are mistakes in the
 * text itself, the same on every deployment: the API answers them with a 400 at the field (the
 * JobSpec schema calls this), while the host rules of {@link checkOutboundUrl}, which depend on the
 * deployment's settings, are a 422.
 * @returns the reason, worded to follow "Cannot use this URL as ".
 */
export function outboundUrlSyntaxProblem(raw: string): string | undefined {
  if (EDGE_SPACE.test(raw)) return "it must not start or end with whitespace";
  if (INNER_CONTROL.test(raw)) return "it must not hold control characters (tab, line break)";
  // The authority as written: after `scheme://`, up to the path, query or fragment (WHATWG
  // reads `\` as `/` in http(s) URLs).
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#\\]*)/i.exec(raw)?.[1];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    if (authority === undefined) {
      return "it must be an absolute URL (http:// or https://, then a host)";
    }
    const hostPort = authority.slice(authority.lastIndexOf("@") + 1);
    if (/^\[[^\]]*%/.test(hostPort)) {
      return "its IPv6 address must not hold a zone id (the %… part), which URLs cannot carry";
    }
    if (/\s/u.test(hostPort)) return "its host must not hold spaces";
    return "its host must be a host name, an IPv4 address or a bracketed IPv6 address, with an optional port up to 65535";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return "its scheme must be http or https";
  }
  // `https:host` and `https:/host` parse as `https://host/`: what is contacted is not what was
  // written.
  if (authority === undefined) return `it must start with ${url.protocol}// and then the host`;
  // `https://@host/` and `https://:@host/` parse to no credentials, but name some all the same.
  if (url.username !== "" || url.password !== "" || authority.includes("@")) {
    return "it must not hold credentials (a user:password@ part, even an empty one)";
  }
  // Host names must come out of parsing as written (up to case and IDNA's xn-- form): IDNA
  // mapping drops a soft hyphen, folds fullwidth letters and percent-decodes, so the host
  // contacted would not be the one written. IP addresses are judged by the host rules as parsed.
  const written = authority.replace(/:[0-9]*$/, "").toLowerCase();
  const host = url.hostname;
  if (
    !host.startsWith("[") && !/^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/.test(host) &&
    host !== written && domainToUnicode(host) !== written
  ) {
    return `its host must be written as it is contacted: URL parsing turns ${
      visible(written)
    } into ${host}`;
  }
  return undefined;
}

/** `text` in quotes with every character outside printable ASCII as `\u{…}`. */
function visible(text: string): string {
  return `"${text.replace(/[^\x21-\x7e]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)}"`;
}

/** Host rules of {@link checkOutboundUrl}. */
export interface OutboundUrlRules {
  /** What the URL is, for messages (e.g. `environment URL`). */
  field: string;
  /** `host` / `host:port` entries (lowercase) the operator listed. */
  allowedHosts: readonly string[];
  /**
   * `allowlist`: only listed hosts; `internal`: public hosts, and internal ones
   * ({@link isInternalHost}) only when listed.
   */
  mode: "allowlist" | "internal";
  /** Name of the variable that lists hosts, for messages. */
  variable: string;
  /** URLs never contacted, on top of {@link serviceUrlsFromEnv}. */
  deniedUrls?: readonly string[];
}

/**
 * Checks `rawUrl` against the syntax rules ({@link outboundUrlSyntaxProblem}: no whitespace at
 * the ends, http(s), no credentials), the host rule of `rules.mode` and the deny list.
 * @returns the parsed URL.
 * @throws OutboundUrlError when it is refused.
 */
export function checkOutboundUrl(rawUrl: string, rules: OutboundUrlRules): URL {
  const refuse = (reason: string) => new OutboundUrlError(rules.field, rawUrl, reason);
  const problem = outboundUrlSyntaxProblem(rawUrl);
  if (problem !== undefined) throw refuse(problem);
  const url = new URL(rawUrl);
  const host = url.hostname.toLowerCase();
  const port = portOf(url)!;
  const allowed = rules.allowedHosts.map((h) => h.toLowerCase());
  const listed = allowed.includes(host) || allowed.includes(`${host}:${port}`);
  if (rules.mode === "allowlist" && !listed) {
    throw refuse(`its host must be listed in ${rules.variable} (${allowed.join(", ")})`);
  }
  if (rules.mode === "internal" && !listed && isInternalHost(host)) {
    throw refuse(
      `its host must be public, or an internal host listed in ${rules.variable} (${
        allowed.join(", ") || "none listed"
      })`,
    );
  }
  for (const raw of [...(rules.deniedUrls ?? []), ...serviceUrlsFromEnv()]) {
    let d: URL;
    try {
      d = new URL(raw);
    } catch {
      continue;
    }
    const dPort = portOf(d);
    if (sameHost(d.hostname.toLowerCase(), host) && (dPort === undefined || dPort === port)) {
      throw refuse("it must not be one of the service's own endpoints");
    }
  }
  return url;
}

/** The variable listing internal hosts an annotator may reach. */
export const ANNOTATOR_HOSTS_VARIABLE = "SEED_ANNOTATOR_ALLOWED_HOSTS";

/**
 * Checks an annotator base URL (`warmup.analyzer.annotator.base_url`; also the rule of
 * `rollout.engine.endpoints[i].base_url`): public hosts pass;
 * internal ones only when listed in `allowedHosts` (default `SEED_ANNOTATOR_ALLOWED_HOSTS`); the
 * service's own endpoints never (see the module doc).
 * @throws OutboundUrlError naming the field.
 */
export function checkAnnotatorUrl(
  rawUrl: string,
  opts: {
    allowedHosts?: readonly string[];
    deniedUrls?: readonly string[];
    /** The field named in errors (default the annotator's; rollout endpoints pass theirs). */
    field?: string;
  } = {},
): URL {
  return checkOutboundUrl(rawUrl, {
    field: opts.field ?? "warmup.analyzer.annotator.base_url",
    allowedHosts: opts.allowedHosts ?? hostListFromEnv(ANNOTATOR_HOSTS_VARIABLE) ?? [],
    mode: "internal",
    variable: ANNOTATOR_HOSTS_VARIABLE,
    deniedUrls: opts.deniedUrls,
  });
}
