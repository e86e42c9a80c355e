import assert from "node:assert/strict";
import {
  checkProvider,
  chooseExecutionProvider,
  explainProviderFailure,
  NoExecutionProviderError,
  probeProvider,
} from "../../../workers/engine/mod.ts";

// These tests create real onnxruntime sessions in real child processes. On a machine without a
// GPU (CI, any machine without one) cuda and webgpu cannot load; where one does load, the tests
// check the choice against it instead.

Deno.test("the cpu provider passes the check graph against its float64 reference", async () => {
  const check = await checkProvider("cpu");
  assert.equal(check.ok, true, check.reason);
  assert.equal(check.reason, undefined);
  assert.equal(check.provider, "cpu");
});

Deno.test("probing cuda, webgpu, cpu takes the first that loads and says why the others did not", async () => {
  const cuda = await probeProvider("cuda");
  const webgpu = await probeProvider("webgpu");
  if (!cuda.ok) {
    assert.match(cuda.reason!, /ONNXRUNTIME_NODE_INSTALL=cuda12|CUDA 12 \/ cuDNN 9|CUDA failed/);
  }
  if (!webgpu.ok) assert.match(webgpu.reason!, /^no WebGPU adapter: /);
  const choice = await chooseExecutionProvider(["cuda", "webgpu", "cpu"]);
  const expected = cuda.ok ? "cuda" : webgpu.ok ? "webgpu" : "cpu";
  assert.equal(choice.provider, expected);
  const skipped = [cuda, webgpu].slice(0, ["cuda", "webgpu", "cpu"].indexOf(expected));
  assert.deepEqual(
    choice.skipped,
    skipped.map((c) => ({ provider: c.provider, reason: c.reason })),
  );
});

Deno.test("without a GPU, the fallback to cpu names the missing CUDA provider and Vulkan loader", async (t) => {
  const choice = await chooseExecutionProvider();
  if (choice.provider !== "cpu") {
    await t.step({ name: "(a GPU provider loaded here: nothing to check)", ignore: true, fn() {} });
    return;
  }
  const [cuda, webgpu] = choice.skipped;
  assert.equal(cuda.provider, "cuda");
  assert.equal(webgpu.provider, "webgpu");
  // This repository's onnxruntime-node is installed without its CUDA provider (Deno runs no
  // postinstall), so the provider's own library is what is missing.
  assert.match(cuda.reason, /^onnxruntime-node's CUDA provider is not installed/);
  assert.match(cuda.reason, /ONNXRUNTIME_NODE_INSTALL=cuda12/);
  assert.match(webgpu.reason, /^no WebGPU adapter: /);
});

Deno.test("a list without cpu fails with every provider's reason when none loads", async (t) => {
  const webgpu = await probeProvider("webgpu");
  if (webgpu.ok) {
    await t.step({ name: "(webgpu loads here: nothing to check)", ignore: true, fn() {} });
    return;
  }
  await assert.rejects(
    () => chooseExecutionProvider(["webgpu"]),
    (e: unknown) => {
      assert.ok(e instanceof NoExecutionProviderError);
      assert.equal(e.checks.length, 1);
      assert.equal(
        e.message,
        `Cannot choose an execution provider as one of webgpu must load: webgpu: ${webgpu.reason}`,
      );
      return true;
    },
  );
});

Deno.test("a check that outlives its timeout is a failure that says so", async () => {
  const check = await probeProvider("cpu", { timeoutMs: 1 });
  assert.equal(check.ok, false);
  assert.match(check.reason!, /^the check did not finish within 0.001 s/);
});

Deno.test("failure reasons name the missing part from the loaders' own messages", () => {
  // Messages as onnxruntime-node 1.30 and Dawn print them (seen on this machine).
  const ortLog =
    "[E:onnxruntime:onnxruntime-node, provider_bridge_ort.cc:2146 Create] Failed to load library " +
    "/x/bin/napi-v6/linux/x64/libonnxruntime_providers_shared.so with error: " +
    "/x/libonnxruntime_providers_shared.so: cannot open shared object file: No such file or directory";
  assert.equal(
    explainProviderFailure(
      "cuda",
      "OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library",
      ortLog,
    ),
    "onnxruntime-node's CUDA provider is not installed (libonnxruntime_providers_shared.so not " +
      "found next to its binding): reinstall onnxruntime-node with ONNXRUNTIME_NODE_INSTALL=cuda12",
  );
  assert.equal(
    explainProviderFailure(
      "cuda",
      "Failed to load shared library",
      "libcudnn.so.9: cannot open shared object file: No such file or directory",
    ),
    "a CUDA 12 / cuDNN 9 library could not load (libcudnn.so.9 not found): install CUDA 12 and " +
      "cuDNN 9 and put their lib folders on LD_LIBRARY_PATH",
  );
  const adapter = "webgpu_context.cc:136 Failed to get a WebGPU adapter: No supported adapters";
  assert.equal(
    explainProviderFailure(
      "webgpu",
      adapter,
      "Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file",
    ),
    "no WebGPU adapter: the Vulkan loader libvulkan.so.1 is not installed",
  );
  assert.equal(
    explainProviderFailure("webgpu", adapter, ""),
    "no WebGPU adapter: no Vulkan driver offers a GPU (is the GPU's Vulkan ICD installed?)",
  );
  assert.equal(explainProviderFailure("cpu", "first line\nsecond", ""), "first line");
});
