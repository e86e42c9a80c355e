/**
 * Internal: serves an embedded PGlite database to other processes over the Postgres wire protocol
 * on loopback, so every process started in one `SEED_DATA_DIR` shares one database (the process
 * that opened the folder first serves it; see `pglite.ts`).
 *
 * PGlite is one backend session. Clients are multiplexed onto it per transaction: a client's
 * messages up to a Sync/Query run while holding PGlite's transaction and query locks, and the
 * locks stay held while the session reports an open transaction (ReadyForQuery status `T`/`E`),
 * so transactions of different clients (and of the serving process itself) never interleave.
 * A client that disconnects inside a transaction is rolled back. Clients must not use named
 * prepared statements (they share one session): connect with postgres.js `prepare: false`.
 *
 * LISTEN/NOTIFY: NotificationResponse messages are taken out of every response and fanned out to
 * the clients that sent `LISTEN channel` and to in-process listeners
 * ({@link PgliteServer.listen}).
 *
 * Why not `@electric-sql/pglite-socket` (version 0.2.17 over our PGlite 0.5.17 under Deno;
 * its runtime imports only `node:net`, so passing our instance works): its
 * `PGLiteSocketServer` multiplexes clients per protocol *message*, not per Sync/transaction, and
 * does not fan out notifications. With two postgres.js clients (`prepare: false`) and
 * `maxConnections: 16`: (1) a `NOTIFY` from one client reached neither a LISTENing client nor a
 * `pg.listen` in the owner process (cross-process wake-ups and SSE would fall back to polling);
 * (2) concurrent transactions from two clients interleaved their Parse/Bind messages and failed
 * with `portal "" does not exist`, which postgres.js raised as an uncaught error; (3) a statement
 * the owner process ran on its PGlite while a client's transaction was open ran inside that
 * transaction and was rolled back with it (it takes only PGlite's query lock, not the
 * transaction lock). Each breaks what tests/jobs/embedded/pglite_test.ts checks, so this file stays
 * until the package multiplexes per transaction and forwards notifications.
 */
import type { PGlite } from "@electric-sql/pglite";

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A running server. */
export interface PgliteServer {
  port: number;
  /** Subscribes in-process to a channel (notifications from every client and this process). */
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  /** Closes every client connection and the listener. */
  stop(): Promise<void>;
}

function message(type: string, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + body.length);
  out[0] = type.charCodeAt(0);
  new DataView(out.buffer).setInt32(1, 4 + body.length);
  out.set(body, 5);
  return out;
}

function cstrings(...parts: string[]): Uint8Array {
  return encoder.encode(parts.map((p) => p + "\0").join(""));
}

function int32s(...values: number[]): Uint8Array {
  const out = new Uint8Array(4 * values.length);
  values.forEach((v, i) => new DataView(out.buffer).setInt32(4 * i, v));
  return out;
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((s, c) => s + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** The server's greeting after a StartupMessage: auth ok, parameters, key data, ready. */
function greeting(pid: number): Uint8Array {
  const params: [string, string][] = [
    ["server_version", "16.0"],
    ["server_encoding", "UTF8"],
    ["client_encoding", "UTF8"],
    ["DateStyle", "ISO, MDY"],
    ["integer_datetimes", "on"],
    ["standard_conforming_strings", "on"],
    ["TimeZone", "UTC"],
  ];
  return concat([
    message("R", int32s(0)),
    ...params.map(([k, v]) => message("S", cstrings(k, v))),
    message("K", int32s(pid, 0)),
    message("Z", encoder.encode("I")),
  ]);
}

/** Splits a response into messages; returns notifications apart and the last ReadyForQuery. */
function splitResponse(data: Uint8Array) {
  const kept: Uint8Array[] = [];
  const notifications: { channel: string; payload: string }[] = [];
  // No ReadyForQuery (a Flush mid extended protocol): the exchange is not over; keep the locks.
  let status: string | undefined;
  for (let at = 0; at + 5 <= data.length;) {
    const len = new DataView(data.buffer, data.byteOffset + at + 1, 4).getInt32(0);
    const msg = data.subarray(at, at + 1 + len);
    const type = String.fromCharCode(msg[0]);
    if (type === "A") {
      const [channel, payload] = decoder.decode(msg.subarray(9)).split("\0");
      notifications.push({ channel, payload });
    } else {
      if (type === "Z") status = String.fromCharCode(msg[5]);
      kept.push(msg);
    }
    at += 1 + len;
  }
  return { data: concat(kept), notifications, status };
}

const LISTEN = /^\s*(un)?listen\s+(?:"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*))\s*;?\s*$/i;

/** ErrorResponse `28P01` (FATAL) for a client whose password does not match. */
function authFailure(): Uint8Array {
  return message(
    "E",
    concat([
      cstrings(
        "SFATAL",
        "VFATAL",
        "C28P01",
        "Mpassword authentication failed for the embedded database",
      ),
      new Uint8Array([0]),
    ]),
  );
}

/** Constant-time string comparison (both sides are at most a few hundred bytes). */
function sameSecret(a: string, b: string): boolean {
  const x = encoder.encode(a);
  const y = encoder.encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/**
 * Starts serving `pg` on `127.0.0.1:port` (0 = a free port). With `password`, a client must send
 * it (cleartext password authentication, fine on loopback) before anything else: without it any
 * user of the machine could connect and read or change every tenant's rows.
 */
export function servePglite(
  pg: PGlite,
  options: { port?: number; password?: string } = {},
): PgliteServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: options.port ?? 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  const listeners = new Map<string, Set<(payload: string) => void>>();
  const subscribed = new Map<string, Promise<unknown>>();
  const conns = new Set<Deno.Conn>();

  const fanOut = (channel: string, payload: string) => {
    for (const fn of listeners.get(channel) ?? []) fn(payload);
  };
  /** Makes PGlite itself dispatch this channel's notifications seen by in-process queries. */
  const subscribe = (channel: string) => {
    if (!subscribed.has(channel)) {
      subscribed.set(channel, pg.listen(channel, (payload) => fanOut(channel, payload)));
    }
    return subscribed.get(channel)!;
  };
  const addListener = (channel: string, fn: (payload: string) => void) => {
    if (!listeners.has(channel)) listeners.set(channel, new Set());
    listeners.get(channel)!.add(fn);
    return () => listeners.get(channel)?.delete(fn);
  };

  /** Holds PGlite's transaction and query locks until `release` is called. */
  const acquire = () =>
    new Promise<() => void>((resolveAcquire) => {
      // deno-lint-ignore no-explicit-any
      const internal = pg as any;
      internal._runExclusiveTransaction(() =>
        internal._runExclusiveQuery(() => new Promise<void>((release) => resolveAcquire(release)))
      );
    });

  async function serve(conn: Deno.Conn, pid: number) {
    let writing = Promise.resolve();
    const write = (bytes: Uint8Array) => {
      writing = writing.then(async () => {
        for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
      }).catch(() => {});
      return writing;
    };
    const mine = new Map<string, () => void>();
    let release: (() => void) | undefined;
    let buffer: Uint8Array = new Uint8Array(0);
    let started = false;
    let authenticated = options.password === undefined;
    let pending: Uint8Array[] = [];
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await conn.read(chunk);
        if (n === null) break;
        buffer = concat([buffer, chunk.subarray(0, n)]);
        for (;;) {
          if (!started) {
            if (buffer.length < 8) break;
            const len = new DataView(buffer.buffer, buffer.byteOffset).getInt32(0);
            if (buffer.length < len) break;
            const code = new DataView(buffer.buffer, buffer.byteOffset).getInt32(4);
            buffer = buffer.subarray(len);
            if (code === SSL_REQUEST || code === GSS_REQUEST) await write(encoder.encode("N"));
            else if (code === PROTOCOL_3) {
              started = true;
              // AuthenticationCleartextPassword, or straight to AuthenticationOk and the rest.
              await write(authenticated ? greeting(pid) : message("R", int32s(3)));
            } else if (code === CANCEL_REQUEST) return;
            else throw new Error(`Cannot serve a client as its protocol must be 3.0: got ${code}`);
            continue;
          }
          if (buffer.length < 5) break;
          const len = new DataView(buffer.buffer, buffer.byteOffset + 1).getInt32(0);
          if (buffer.length < 1 + len) break;
          const msg = buffer.slice(0, 1 + len);
          buffer = buffer.subarray(1 + len);
          const type = String.fromCharCode(msg[0]);
          if (type === "X") return;
          if (!authenticated) {
            // PasswordMessage: password\0.
            const given = decoder.decode(msg.subarray(5)).split("\0")[0];
            if (type !== "p" || !sameSecret(given, options.password!)) {
              await write(authFailure());
              return;
            }
            authenticated = true;
            await write(greeting(pid));
            continue;
          }
          pending.push(msg);
          if (type === "Q" || type === "P") {
            // Query: text\0. Parse: name\0 text\0 params.
            const fields = decoder.decode(msg.subarray(5)).split("\0");
            const m = (type === "Q" ? fields[0] : fields[1]).match(LISTEN);
            if (m) {
              const channel = m[2]?.replaceAll('""', '"') ?? m[3].toLowerCase();
              if (m[1]) mine.get(channel)?.();
              else if (!mine.has(channel)) {
                mine.set(
                  channel,
                  addListener(
                    channel,
                    (p) => write(message("A", concat([int32s(pid), cstrings(channel, p)]))),
                  ),
                );
              }
            }
          }
          if (type !== "S" && type !== "Q" && type !== "H") continue;
          const batch = concat(pending);
          pending = [];
          release ??= await acquire();
          let out;
          try {
            out = splitResponse(await pg.execProtocolRaw(batch));
          } catch (e) {
            release();
            release = undefined;
            throw e;
          }
          if (out.status === "I") {
            release();
            release = undefined;
          }
          // A LISTEN is acknowledged once PGlite's session listens too, so a NOTIFY sent after
          // the client saw the acknowledgement reaches it (the worker re-reads a job's cancel
          // state right after subscribing; a window here would lose the cancel until a heartbeat).
          // Inside a transaction this client holds the locks pg.listen needs: not awaited then.
          if (!release) {
            for (const channel of mine.keys()) await subscribe(channel).catch(() => {});
          }
          await write(out.data);
          for (const { channel, payload } of out.notifications) fanOut(channel, payload);
          for (const channel of mine.keys()) if (!subscribed.has(channel)) subscribe(channel);
        }
      }
    } finally {
      for (const remove of mine.values()) remove();
      if (release) {
        // The client left inside a transaction: roll it back before others continue.
        await pg.execProtocolRaw(concat([message("Q", cstrings("ROLLBACK"))])).catch(() => {});
        release();
      }
      conns.delete(conn);
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  }

  let nextPid = 1000;
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      serve(conn, nextPid++).catch(() => {});
    }
  })().catch(() => {});

  return {
    port,
    async listen(channel, fn) {
      const remove = addListener(channel, fn);
      await subscribe(channel);
      return () => {
        remove();
        return Promise.resolve();
      };
    },
    async stop() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      await accepting;
    },
  };
}
