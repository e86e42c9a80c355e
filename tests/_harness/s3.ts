/**
 * An s3rver on a free loopback port over a temporary folder, for tests that need object storage.
 */
import { startLocalS3 } from "../../jobs/embedded/mod.ts";
import { type ArtifactStore, openStore } from "../../jobs/store.ts";

/** A throwaway S3 server and a store on a fresh bucket of it. */
export interface TestStore {
  store: ArtifactStore;
  endpoint: string;
  /** The server's folder (objects are files named after bucket and key). */
  directory: string;
  /** Environment that points another process at this server and bucket. */
  env: Record<string, string>;
  /** Closes the client, stops the server and removes its folder. */
  close(): Promise<void>;
}

/** Starts s3rver on port 0 and opens a store on bucket `test-<random>` (created). */
export async function startTestStore(
  options: { multipartBytes?: number } = {},
): Promise<TestStore> {
  const directory = await Deno.makeTempDir({ prefix: "seed-s3-" });
  const server = await startLocalS3({ directory });
  const env = {
    S3_ENDPOINT: server.endpoint,
    S3_BUCKET: `test-${crypto.randomUUID().slice(0, 8)}`,
    S3_ACCESS_KEY_ID: "S3RVER",
    S3_SECRET_ACCESS_KEY: "S3RVER",
    S3_REGION: "us-east-1",
  };
  const store = await openStore({
    endpoint: env.S3_ENDPOINT,
    bucket: env.S3_BUCKET,
    accessKeyId: env.S3_ACCESS_KEY_ID,
    secretAccessKey: env.S3_SECRET_ACCESS_KEY,
    multipartBytes: options.multipartBytes,
  });
  return {
    store,
    endpoint: server.endpoint,
    directory,
    env,
    async close() {
      await store.close();
      await server.stop();
      await Deno.remove(directory, { recursive: true }).catch(() => {});
    },
  };
}
