/**
 * SSRF attempts against the HTTP environment client's URL check with the default (loopback)
 * allowlist: aliases of a denied loopback endpoint, and the embedded database and object store
 * of `SEED_DATA_DIR`, which no environment variable names.
 */
import assert from "node:assert/strict";
import { checkEnvUrl, EnvUrlNotAllowedError } from "../../../../workers/envs/http/client.ts";

const loopback = { allowedHosts: ["localhost", "127.0.0.1", "[::1]"] };

/** Runs `fn` with the given environment variables set (undefined: unset), then restores them. */
function withEnv(vars: Record<string, string | undefined>, fn: () => void): void {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      x === undefined ? Deno.env.delete(k) : Deno.env.set(k, x);
    }
  };
  apply(vars);
  try {
    fn();
  } finally {
    apply(before);
  }
}

Deno.test("a database on localhost is also refused through every other loopback name", () => {
  const opts = { ...loopback, deniedUrls: ["postgres://seed@localhost:5432/seed"] };
  for (
    const url of [
      "http://127.0.0.1:5432/",
      "http://[::1]:5432/",
      "http://2130706433:5432/",
      "http://0x7f000001:5432/",
      "http://127.1:5432/",
      "http://LOCALHOST:5432/",
    ]
  ) {
    assert.throws(() => checkEnvUrl(url, opts), /service's own endpoints/, url);
  }
  assert.ok(checkEnvUrl("http://127.0.0.1:5433/", opts));
});

Deno.test("hosts outside the allowlist are refused however they are spelled", () => {
  for (
    const url of [
      "http://0.0.0.0:8787/",
      "http://[::]:8787/",
      "http://localhost.:8787/",
      "http://127.0.0.2:8787/",
      "http://[::ffff:127.0.0.1]:8787/",
      "http://169.254.169.254/latest/meta-data/",
      "http://127.0.0.1.nip.io:8787/",
      "http://u@127.0.0.1:8787/",
    ]
  ) {
    assert.throws(() => checkEnvUrl(url, loopback), EnvUrlNotAllowedError, url);
  }
});

Deno.test("the embedded database and object store of SEED_DATA_DIR are refused", () => {
  const dir = Deno.makeTempDirSync({ prefix: "seed-ssrf-" });
  try {
    Deno.writeTextFileSync(`${dir}/pg.lock`, JSON.stringify({ pid: 1, port: 41234 }));
    Deno.writeTextFileSync(`${dir}/s3.json`, JSON.stringify({ pid: 1, port: 41235 }));
    withEnv({ SEED_DATA_DIR: dir, DATABASE_URL: undefined, S3_ENDPOINT: undefined }, () => {
      for (const url of ["http://127.0.0.1:41234/", "http://localhost:41235/seed/tenants/"]) {
        assert.throws(() => checkEnvUrl(url, loopback), /service's own endpoints/, url);
      }
      assert.ok(checkEnvUrl("http://127.0.0.1:41236/", loopback));
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
