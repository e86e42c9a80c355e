import assert from "node:assert/strict";
import { checkAnnotatorUrl, isInternalHost, OutboundUrlError } from "../../jobs/outbound_url.ts";

const none = { allowedHosts: [] as string[] };

Deno.test("annotator URLs on public hosts pass and internal ones are refused", () => {
  for (
    const url of [
      "https://api.openai.com/v1",
      "https://api.together.xyz/v1/",
      "http://93.184.215.14:8000/v1",
      "https://[2606:4700::1111]/v1",
    ]
  ) {
    assert.equal(checkAnnotatorUrl(url, none).href.startsWith("http"), true, url);
  }
  for (
    const url of [
      "http://127.0.0.1:8000/v1",
      "http://localhost:8000/v1",
      "http://2130706433/v1",
      "http://0.0.0.0/v1",
      "http://[::1]:8000/v1",
      "http://[::ffff:10.0.0.1]/v1",
      "http://10.0.0.5/v1",
      "http://172.20.1.1/v1",
      "http://192.168.1.10/v1",
      "http://100.64.0.1/v1",
      "http://169.254.169.254/latest/meta-data/",
      "http://[fd00::1]/v1",
      "http://[fe80::1]/v1",
      "http://vllm:8000/v1",
      "http://vllm.internal/v1",
      "http://box.local/v1",
      "http://a.localhost/v1",
    ]
  ) {
    assert.throws(
      () => checkAnnotatorUrl(url, none),
      (e) => e instanceof OutboundUrlError && e.field === "warmup.analyzer.annotator.base_url",
      url,
    );
  }
});

Deno.test("the operator's list admits an internal host, by host or host:port", () => {
  assert.ok(checkAnnotatorUrl("http://127.0.0.1:8000/v1", { allowedHosts: ["127.0.0.1"] }));
  const byPort = { allowedHosts: ["vllm.internal:8000"] };
  assert.ok(checkAnnotatorUrl("http://vllm.internal:8000/v1", byPort));
  assert.throws(() => checkAnnotatorUrl("http://vllm.internal:8001/v1", byPort), OutboundUrlError);
});

Deno.test("credentials, other schemes and the service's own endpoints are refused", () => {
  const opts = { allowedHosts: ["127.0.0.1"], deniedUrls: ["postgres://seed@localhost:5432/x"] };
  assert.throws(() => checkAnnotatorUrl("http://127.0.0.1:5432/v1", opts), /service's own/);
  assert.throws(() => checkAnnotatorUrl("https://u:p@api.openai.com/v1", none), /credentials/);
  // The refusal names the URL without repeating its password.
  assert.throws(
    () => checkAnnotatorUrl("https://user:hunter2@api.openai.com/v1", none),
    (e: Error) => !e.message.includes("hunter2") && e.message.includes("user:***@"),
  );
  assert.throws(() => checkAnnotatorUrl("ftp://api.openai.com/v1", none), /scheme/);
  assert.throws(() => checkAnnotatorUrl("api.openai.com/v1", none), /absolute URL/);
});

Deno.test("internal hosts as URL parsing writes them", () => {
  assert.equal(isInternalHost("172.15.255.255"), false);
  assert.equal(isInternalHost("172.16.0.0"), true);
  assert.equal(isInternalHost("172.31.255.255"), true);
  assert.equal(isInternalHost("172.32.0.0"), false);
  assert.equal(isInternalHost("8.8.8.8"), false);
  assert.equal(isInternalHost("[2001:db8::1]"), false);
  assert.equal(isInternalHost("example.com"), false);
});

Deno.test("every IPv6 form that embeds an internal IPv4 address, and site-local, is refused", () => {
  for (
    const url of [
      "http://[::127.0.0.1]/v1",
      "http://[::ffff:0:127.0.0.1]/v1",
      "http://[64:ff9b::127.0.0.1]/v1",
      "http://[64:ff9b::10.0.0.1]/v1",
      "http://[::ffff:192.168.1.1]/v1",
      "http://[2002:7f00:1::]/v1",
      "http://[fec0::1]/v1",
      "http://[feff::1]/v1",
      "http://[64:ff9b:1::8.8.8.8]/v1",
    ]
  ) {
    assert.equal(isInternalHost(new URL(url).hostname), true, url);
    assert.throws(() => checkAnnotatorUrl(url, none), OutboundUrlError, url);
  }
  for (const url of ["http://[64:ff9b::8.8.8.8]/v1", "http://[2606:4700:4700::1111]/v1"]) {
    assert.equal(isInternalHost(new URL(url).hostname), false, url);
  }
});
