/**
 * The embedded object store: an S3-compatible server (s3rver) on loopback over a local folder, so
 * the artifact store has one code path with or without a real S3 (see jobs/store.ts).
 *
 * Several processes started in one data folder share one server:
 * - `${dataDir}/s3.json` names the running server (`{port, pid}`); a process that finds it
 *   answering as an S3 server uses it;
 * - otherwise the process takes `${dataDir}/s3.lock` (created exclusively; a lock whose pid is
 *   dead is stale and removed), checks again, starts its own server on a free port over
 *   `${dataDir}/s3/`, writes `s3.json` and drops the lock;
 * - requests must be signed with the folder's random secret (`s3.secret`, see
 *   {@link localS3Credentials}); the server refuses anything else (see {@link startLocalS3});
 * - the server lives as long as the process that started it. When that process exits, the others'
 *   next request fails to connect; the artifact store then runs this discovery again (one of them
 *   starts a new server over the same folder, the others find it) and retries the request.
 *   Presigned URLs name the port, so URLs minted before such a hand-over stop working.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import S3rver from "s3rver";
import { sigV4Refusal } from "./_sigv4.ts";
import { readOrCreateSecret } from "./_secret_file.ts";

/**
 * Credentials of {@link startLocalS3}'s default account (s3rver's built-in dummy account). They
 * are public: the embedded store of a data folder ({@link ensureLocalS3}) uses a random secret.
 */
export const LOCAL_S3_CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } as const;

/** S3 credentials (the access key id is always s3rver's `S3RVER` account). */
export interface LocalS3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** A running local S3 server. */
export interface LocalS3 {
  /** `http://127.0.0.1:PORT`. */
  endpoint: string;
  port: number;
  /** What requests must be signed with. */
  credentials: LocalS3Credentials;
  /** Stops the server if this process started it (no-op for a shared one). Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts s3rver over `directory` behind a loopback front on `127.0.0.1:port` (0 = a free port)
 * that refuses (403, S3 XML) every request without a valid, current AWS SigV4 signature of
 * `credentials` (default {@link LOCAL_S3_CREDENTIALS}), header-signed or presigned. s3rver alone
 * serves unsigned requests and never checks V4 signatures: anyone on the machine could list the
 * bucket and read every tenant's objects, or turn one presigned URL into any other key.
 * @throws when the port is taken or the folder cannot be created.
 */
export async function startLocalS3(
  options: { directory: string; port?: number; credentials?: LocalS3Credentials },
): Promise<LocalS3> {
  mkdirSync(options.directory, { recursive: true });
  const credentials = options.credentials ?? { ...LOCAL_S3_CREDENTIALS };
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    directory: options.directory,
    silent: true,
  });
  const inner = await server.run() as { port: number };
  const front = Deno.serve(
    { hostname: "127.0.0.1", port: options.port ?? 0, onListen: () => {} },
    (req) => forwardSigned(req, inner.port, credentials, options.directory),
  );
  let stopped = false;
  return {
    endpoint: `http://127.0.0.1:${front.addr.port}`,
    port: front.addr.port,
    credentials,
    async stop() {
      if (stopped) return;
      stopped = true;
      await front.shutdown();
      await server.close();
    },
  };
}

/**
 * Passes a correctly signed request on to s3rver on `innerPort` (answering AbortMultipartUpload
 * itself, see {@link abortMultipartUpload}); 403 otherwise.
 */
async function forwardSigned(
  req: Request,
  innerPort: number,
  credentials: LocalS3Credentials,
  directory: string,
): Promise<Response> {
  const refusal = sigV4Refusal(
    req,
    (id) => id === credentials.accessKeyId ? credentials.secretAccessKey : undefined,
  );
  if (refusal !== undefined) {
    const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>` +
      `<Message>Access Denied: ${refusal}</Message></Error>`;
    return new Response(xml, { status: 403, headers: { "content-type": "application/xml" } });
  }
  const url = new URL(req.url);
  if (req.method === "DELETE" && url.searchParams.has("uploadId")) {
    return await abortMultipartUpload(directory, url);
  }
  const headers = new Headers(req.headers);
  headers.delete("host");
  // Bodies are buffered: they are single objects or multipart parts, and s3rver wants a length.
  const body = req.method === "GET" || req.method === "HEAD"
    ? undefined
    : new Uint8Array(await req.arrayBuffer());
  const res = await fetch(`http://127.0.0.1:${innerPort}${url.pathname}${url.search}`, {
    method: req.method,
    headers,
    body,
    redirect: "manual",
    signal: req.signal,
  });
  return new Response(res.body, { status: res.status, headers: res.headers });
}

/** An S3 error answer (`<Error><Code>…`). */
function s3Error(status: number, code: string, message: string): Response {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code>` +
    `<Message>${message}</Message></Error>`;
  return new Response(xml, { status, headers: { "content-type": "application/xml" } });
}

/**
 * AbortMultipartUpload (`DELETE /{bucket}/{key}?uploadId=…`), which s3rver does not implement (it
 * answers 405): removes the upload's folder, `{directory}/{bucket}/._S3rver_uploads/{uploadId}/`
 * (its parts), when it is an upload of that key, and answers 204 as S3 does; 404 `NoSuchUpload`
 * otherwise. Without it a failed multipart upload (jobs/_multipart.ts aborts it at once) left its
 * parts on disk until the sweeper's grace had passed.
 */
async function abortMultipartUpload(directory: string, url: URL): Promise<Response> {
  const noSuchUpload = () =>
    s3Error(404, "NoSuchUpload", "The specified multipart upload does not exist.");
  const uploadId = url.searchParams.get("uploadId") ?? "";
  const slash = url.pathname.indexOf("/", 1);
  const bucket = url.pathname.slice(1, slash < 0 ? undefined : slash);
  // s3rver's upload ids are 32 hex digits; both checks keep the path inside the folder.
  if (!/^[0-9a-f]{32}$/.test(uploadId) || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    return noSuchUpload();
  }
  let key: string;
  try {
    key = decodeURIComponent(url.pathname.slice(bucket.length + 2));
  } catch {
    return noSuchUpload();
  }
  const folder = join(directory, bucket, "._S3rver_uploads", uploadId);
  try {
    if (await Deno.readTextFile(join(folder, "key")) !== key) return noSuchUpload();
    await Deno.remove(folder, { recursive: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return noSuchUpload();
    throw e;
  }
  return new Response(null, { status: 204 });
}

/** True when an S3 server answers on the port (s3rver's ListBuckets XML). */
async function answersAsS3(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2_000) });
    const text = await res.text();
    return text.includes("ListAllMyBucketsResult") || text.includes("<Error>");
  } catch {
    return false;
  }
}

function isAlive(pid: number): boolean {
  if (pid === Deno.pid) return true;
  return existsSync("/proc/self") ? existsSync(`/proc/${pid}`) : true;
}

async function readInfo(path: string): Promise<{ port: number; pid: number } | undefined> {
  try {
    const info = JSON.parse(await Deno.readTextFile(path));
    return Number.isInteger(info.port) ? info : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The data folder's S3 credentials: a random secret in `${dataDir}/s3.secret` (mode 0600, so
 * only this user's processes can sign; see jobs/embedded/_secret_file.ts).
 */
export function localS3Credentials(dataDir: string): LocalS3Credentials {
  const secret = readOrCreateSecret(join(dataDir, "s3.secret"));
  return { accessKeyId: LOCAL_S3_CREDENTIALS.accessKeyId, secretAccessKey: secret };
}

/**
 * A start lock older than this is stale whatever its pid says: starting the server takes about a
 * second, and a pid alone is reused (a restarted container's process often gets the pid of the
 * predecessor that was killed while holding the lock, and would wait on itself for ever).
 */
const STALE_LOCK_MS = 30_000;

async function lockOlderThan(path: string, ms: number): Promise<boolean> {
  try {
    const mtime = (await Deno.stat(path)).mtime;
    return mtime !== null && Date.now() - mtime.getTime() > ms;
  } catch {
    return false; // gone meanwhile
  }
}

/** Servers this process started, by data folder (one per folder). */
const owned = new Map<string, LocalS3>();

/**
 * Finds the data folder's running server or starts one (see module doc).
 * @throws when no server can be found or started within ~10 s (a lock held by a live process
 *   that never writes `s3.json`).
 */
export async function ensureLocalS3(dataDir: string): Promise<LocalS3> {
  mkdirSync(dataDir, { recursive: true });
  const infoPath = join(dataDir, "s3.json");
  const lockPath = join(dataDir, "s3.lock");
  const mine = owned.get(dataDir);
  if (mine) return mine;
  const credentials = localS3Credentials(dataDir);
  const shared = (port: number): LocalS3 => ({
    endpoint: `http://127.0.0.1:${port}`,
    port,
    credentials,
    stop: () => Promise.resolve(),
  });
  for (let i = 0; i < 100; i++) {
    const info = await readInfo(infoPath);
    if (info && await answersAsS3(info.port)) return shared(info.port);
    let lock: Deno.FsFile;
    try {
      lock = await Deno.open(lockPath, { write: true, createNew: true });
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const pid = Number((await Deno.readTextFile(lockPath).catch(() => "")).trim());
      if ((pid > 0 && !isAlive(pid)) || await lockOlderThan(lockPath, STALE_LOCK_MS)) {
        await Deno.remove(lockPath).catch(() => {});
      }
      await new Promise((r) => setTimeout(r, 100)); // another process is starting the server
      continue;
    }
    try {
      await lock.write(new TextEncoder().encode(String(Deno.pid)));
      lock.close();
      const again = await readInfo(infoPath);
      if (again && await answersAsS3(again.port)) return shared(again.port);
      const server = await startLocalS3({ directory: join(dataDir, "s3"), credentials });
      await Deno.writeTextFile(infoPath, JSON.stringify({ port: server.port, pid: Deno.pid }));
      const entry: LocalS3 = {
        ...server,
        async stop() {
          owned.delete(dataDir);
          await server.stop();
          const current = await readInfo(infoPath);
          if (current?.pid === Deno.pid) await Deno.remove(infoPath).catch(() => {});
        },
      };
      owned.set(dataDir, entry);
      return entry;
    } finally {
      await Deno.remove(lockPath).catch(() => {});
    }
  }
  throw new Error(
    `Cannot start the embedded S3 server in ${dataDir} as ${lockPath} must be released: it stayed held for 10 s`,
  );
}
