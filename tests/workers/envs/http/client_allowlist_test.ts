import assert from "node:assert/strict";
import {
  checkEnvUrl,
  connectHttpEnvironment,
  EnvUrlNotAllowedError,
} from "../../../../workers/envs/mod.ts";

const loopback = { allowedHosts: ["localhost", "127.0.0.1", "[::1]"] };

Deno.test("loopback URLs are allowed by default and other hosts are refused", () => {
  assert.equal(checkEnvUrl("http://127.0.0.1:8787/envs/sokoban", loopback).port, "8787");
  assert.ok(checkEnvUrl("http://[::1]:9000", loopback));
  for (
    const url of ["http://10.0.0.5:8787", "http://envs.example.com", "http://169.254.169.254/"]
  ) {
    assert.throws(() => checkEnvUrl(url, loopback), EnvUrlNotAllowedError);
  }
});

Deno.test("allowlist entries with a port allow only that port", () => {
  const opts = { allowedHosts: ["envs.internal:8080", "gpu-box"] };
  assert.ok(checkEnvUrl("http://envs.internal:8080/", opts));
  assert.throws(() => checkEnvUrl("http://envs.internal:8081/", opts), EnvUrlNotAllowedError);
  assert.ok(checkEnvUrl("https://GPU-BOX:1234/x", opts));
});

Deno.test("the service's own database and store are refused even on an allowed host", () => {
  const opts = {
    ...loopback,
    deniedUrls: ["postgres://seed:pw@127.0.0.1/seed", "http://localhost:9000/bucket"],
  };
  assert.throws(() => checkEnvUrl("http://127.0.0.1:5432/", opts), /service's own endpoints/);
  assert.throws(() => checkEnvUrl("http://localhost:9000/v1/info", opts), EnvUrlNotAllowedError);
  assert.ok(checkEnvUrl("http://localhost:9001/", opts));
});

Deno.test("other schemes and URLs with credentials are refused", () => {
  for (
    const url of ["file:///etc/passwd", "ftp://127.0.0.1/", "http://u:p@127.0.0.1/", "not a url"]
  ) {
    assert.throws(() => checkEnvUrl(url, loopback), EnvUrlNotAllowedError);
  }
});

Deno.test("SEED_ENV_ALLOWED_HOSTS replaces the default allowlist", () => {
  const before = Deno.env.get("SEED_ENV_ALLOWED_HOSTS");
  Deno.env.set("SEED_ENV_ALLOWED_HOSTS", "envs.internal:8080");
  try {
    assert.ok(checkEnvUrl("http://envs.internal:8080/"));
    assert.throws(() => checkEnvUrl("http://127.0.0.1:8787/"), EnvUrlNotAllowedError);
  } finally {
    if (before === undefined) Deno.env.delete("SEED_ENV_ALLOWED_HOSTS");
    else Deno.env.set("SEED_ENV_ALLOWED_HOSTS", before);
  }
});

Deno.test("the client refuses a disallowed URL before sending anything", async () => {
  let calls = 0;
  const spy: typeof fetch = (input, init) => {
    calls++;
    return fetch(input, init);
  };
  await assert.rejects(
    () => connectHttpEnvironment("http://example.com:8787/", { ...loopback, fetch: spy }),
    EnvUrlNotAllowedError,
  );
  await assert.rejects(
    () =>
      connectHttpEnvironment("http://127.0.0.1:5432/", {
        ...loopback,
        deniedUrls: ["postgres://127.0.0.1:5432/db"],
        fetch: spy,
      }),
    EnvUrlNotAllowedError,
  );
  assert.equal(calls, 0);
});
