/**
 * A throwaway local Postgres cluster: a real Postgres server in a temporary folder on a free
 * loopback port, for a local stack that needs more than the embedded PGlite (several connections
 * at once, an outage to pause and resume). The test suite (tests/run.ts) and the benchmarks start
 * their database with it. `initdb` refuses to run as root, so the cluster is created and run as
 * the `postgres` user when we are root.
 */
import { existsSync } from "node:fs";

/** A running throwaway cluster: its connection URL, server binaries and a stop function. */
export interface ThrowawayPostgres {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`, trust auth. */
  url: string;
  /** Folder holding `initdb`, `pg_ctl`, `postgres`. */
  binDir: string;
  /** Stops the server by the pid in its `postmaster.pid` and removes the data folder. */
  stop(): Promise<void>;
  /** Stops the server (fast shutdown: connections are cut) but keeps its data, for an outage. */
  pause(): Promise<void>;
  /** Starts a paused server again on the same port and data. */
  resume(): Promise<void>;
}

function findBinDir(): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && existsSync(`${dir}/initdb`) && existsSync(`${dir}/pg_ctl`)) return dir;
  }
  try {
    const versions = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => e.name)
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const dir = `/usr/lib/postgresql/${v}/bin`;
      if (existsSync(`${dir}/initdb`)) return dir;
    }
  } catch { /* no Debian postgres */ }
  return undefined;
}

async function sh(cmd: string[], opts: { asPostgres?: boolean } = {}): Promise<string> {
  const isRoot = Deno.uid() === 0;
  const argv = opts.asPostgres && isRoot ? ["runuser", "-u", "postgres", "--", ...cmd] : cmd;
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`Cannot run ${argv.join(" ")}: ${text.trim()}`);
  return text;
}

async function ensureInstalled(): Promise<string> {
  let binDir = findBinDir();
  if (binDir) return binDir;
  if (Deno.uid() !== 0) {
    throw new Error(
      "Cannot start the test database as no Postgres server was found: install Debian's `postgresql` package (or put initdb/pg_ctl on PATH)",
    );
  }
  console.error("harness: no Postgres server found; installing Debian's postgresql package…");
  await sh(["apt-get", "update", "-qq"]);
  await sh([
    "env",
    "DEBIAN_FRONTEND=noninteractive",
    "apt-get",
    "install",
    "-y",
    "-qq",
    "postgresql",
  ]);
  binDir = findBinDir();
  if (!binDir) throw new Error("Cannot find initdb after installing postgresql");
  return binDir;
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Creates and starts a cluster in a fresh temporary folder; throws with initdb's output on failure.
 */
export async function startPostgres(): Promise<ThrowawayPostgres> {
  const binDir = await ensureInstalled();
  const dir = await Deno.makeTempDir({ prefix: "seed-pg-" });
  if (Deno.uid() === 0) await sh(["chown", "postgres:postgres", dir]);
  await sh([`${binDir}/initdb`, "-D", dir, "-U", "postgres", "--auth=trust", "-E", "UTF8"], {
    asPostgres: true,
  });
  const port = freePort();
  const options =
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const start = () =>
    sh([`${binDir}/pg_ctl`, "-D", dir, "-o", options, "-l", `${dir}/server.log`, "-w", "start"], {
      asPostgres: true,
    });
  await start();
  const readPid = async () =>
    Number((await Deno.readTextFile(`${dir}/postmaster.pid`)).split("\n")[0]);
  let pid = await readPid();
  const halt = async () => {
    try {
      Deno.kill(pid, "SIGINT"); // fast shutdown
      for (let i = 0; i < 100 && existsSync(`${dir}/postmaster.pid`); i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
    } catch { /* already gone */ }
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    binDir,
    async stop() {
      await halt();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
    pause: halt,
    async resume() {
      await start();
      pid = await readPid();
    },
  };
}
