/**
 * Internal: verification of AWS Signature Version 4 on an incoming S3 request, header form
 * (`Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`) and query form
 * (presigned URLs: `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
 * `X-Amz-SignedHeaders`, `X-Amz-Signature`). s3rver accepts unsigned requests and does not check
 * V4 signatures at all, so the embedded store puts this check in front of it
 * (jobs/embedded/local_s3.ts).
 *
 * Formulas: AWS "Signature Version 4 signing process" (canonical request, string to sign,
 * derived signing key kDate → kRegion → kService → kSigning), with S3's rules: the path is
 * not normalised, and the payload hash is the `x-amz-content-sha256` header (header form) or
 * `UNSIGNED-PAYLOAD` (query form). The body itself is not hashed here.
 */
import { Buffer } from "node:buffer";
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** Allowed clock skew of a header-signed request, and the longest presigned lifetime (s). */
const MAX_SKEW_S = 15 * 60;
const MAX_EXPIRES_S = 7 * 24 * 3600;

/** RFC 3986 encoding as SigV4 wants it (unreserved characters kept, everything else %XX). */
function encode(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const hmac = (key: string | Buffer, s: string) => createHmac("sha256", key).update(s).digest();

/** `20261130T120000Z` → epoch ms, or NaN. */
function amzDateMs(d: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(d);
  return m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : NaN;
}

/**
 * Checks the request's SigV4 signature.
 * @param secretFor the secret of an access key id, undefined for an unknown one.
 * @returns undefined when the signature is valid and current, else why it is refused.
 */
export function sigV4Refusal(
  req: Request,
  secretFor: (accessKeyId: string) => string | undefined,
  nowMs = Date.now(),
): string | undefined {
  const url = new URL(req.url);
  const auth = req.headers.get("authorization");
  const q = url.searchParams;
  let credential: string, signedHeaders: string, signature: string, amzDate: string;
  let payloadHash: string;
  const query: [string, string][] = [];
  if (auth !== null) {
    const m =
      /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/
        .exec(auth.trim());
    if (!m) return "the Authorization header must be AWS4-HMAC-SHA256";
    [, credential, signedHeaders, signature] = m;
    amzDate = req.headers.get("x-amz-date") ?? "";
    payloadHash = req.headers.get("x-amz-content-sha256") ?? "UNSIGNED-PAYLOAD";
    if (!(Math.abs(nowMs - amzDateMs(amzDate)) <= MAX_SKEW_S * 1000)) {
      return "x-amz-date must be within 15 minutes of now";
    }
    for (const [k, v] of q) query.push([k, v]);
  } else if (q.get("X-Amz-Algorithm") === "AWS4-HMAC-SHA256") {
    credential = q.get("X-Amz-Credential") ?? "";
    signedHeaders = q.get("X-Amz-SignedHeaders") ?? "";
    signature = q.get("X-Amz-Signature") ?? "";
    amzDate = q.get("X-Amz-Date") ?? "";
    payloadHash = q.get("X-Amz-Content-Sha256") ?? "UNSIGNED-PAYLOAD";
    const expires = Number(q.get("X-Amz-Expires"));
    const signedAt = amzDateMs(amzDate);
    if (!Number.isInteger(expires) || expires < 1 || expires > MAX_EXPIRES_S) {
      return "X-Amz-Expires must be 1..604800 seconds";
    }
    if (!(nowMs >= signedAt - MAX_SKEW_S * 1000 && nowMs <= signedAt + expires * 1000)) {
      return "the presigned URL has expired";
    }
    for (const [k, v] of q) if (k !== "X-Amz-Signature") query.push([k, v]);
  } else {
    return "the request must be signed (AWS Signature Version 4)";
  }
  const [accessKeyId, date8, region, service, terminal, ...rest] = credential.split("/");
  const secret = secretFor(accessKeyId ?? "");
  if (secret === undefined) return "the access key id is unknown";
  if (rest.length || terminal !== "aws4_request" || date8 !== amzDate.slice(0, 8)) {
    return "the credential scope must be KEY/DATE/REGION/SERVICE/aws4_request";
  }
  const names = signedHeaders.split(";");
  if (!names.includes("host")) return "the signed headers must include host";
  const canonicalHeaders = names.map((n) =>
    `${n}:${(req.headers.get(n) ?? (n === "host" ? url.host : "")).trim().replace(/\s+/g, " ")}\n`
  ).join("");
  const canonicalQuery = query.map(([k, v]) => [encode(k), encode(v)])
    .sort(([a, x], [b, y]) => a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0)
    .map(([k, v]) => `${k}=${v}`).join("&");
  const canonicalUri = url.pathname.split("/").map((s) => encode(safeDecode(s))).join("/");
  const canonicalRequest = [
    req.method,
    canonicalUri,
    canonicalQuery,
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join("\n");
  const scope = `${date8}/${region}/${service}/aws4_request`;
  const stringToSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256(canonicalRequest)}`;
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date8), region), service), "aws4_request");
  const expected = createHmac("sha256", key).update(stringToSign).digest();
  const given = Buffer.from(signature, "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return "the signature does not match";
  }
  return undefined;
}
