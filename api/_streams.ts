/**
 * Node stream helpers shared by the tar writers of the API (api/tar.ts) and the CLI (api/client).
 */

/**
 * Resolves once `sink` drains, or closes when the reader went away (the request was aborted).
 * Both listeners go as soon as either fires: a `close` listener left behind per full buffer
 * piled up on a file's sink (MaxListenersExceededWarning after 10, during any multi-MB upload).
 */
export function drainedOrClosed(sink: {
  destroying?: boolean;
  on(event: string, f: () => void): unknown;
  off(event: string, f: () => void): unknown;
}): Promise<void> {
  // Already being destroyed (the reader left between two writes): its close may have fired.
  if (sink.destroying) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      sink.off("drain", done);
      sink.off("close", done);
      resolve();
    };
    sink.on("drain", done);
    sink.on("close", done);
  });
}
