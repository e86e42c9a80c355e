/**
 * The artifact store (key layout: workers/seed/README.md, "Checkpoints and skill libraries") on
 * `@aws-sdk/client-s3`, configured for any S3-compatible server: path-style; checksums only when
 * required (with the SDK's default, streamed uploads are sent aws-chunked and s3rver stores the
 * chunk framing inside the object); bytes or Node streams as bodies (the SDK's Node handler
 * rejects web `ReadableStream`s).
 *
 * Configuration: `S3_ENDPOINT`, `S3_BUCKET` (default `seed`), `S3_REGION` (default `us-east-1`),
 * `S3_ACCESS_KEY_ID`, `S3_SECRET_ACCESS_KEY`. Without `S3_ENDPOINT` the embedded server of
 * `jobs/embedded/local_s3.ts` is used over `${SEED_DATA_DIR}/s3`. The bucket is created when
 * missing.
 *
 * Every upload computes the object's SHA-256 (returned, to be recorded in the object's row) and
 * every verified read recomputes it ({@link IntegrityError} on mismatch). Objects larger than the
 * multipart threshold (default 8 MiB) are uploaded in parts.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { dataDirFromEnv } from "./db.ts";
import { ConfigurationError, IntegrityError } from "./errors.ts";
import { ensureLocalS3 } from "./embedded/mod.ts";
import { regroup, uploadMultipart } from "./_multipart.ts";

/** Default multipart threshold and part size: 8 MiB (S3's minimum part is 5 MiB). */
export const DEFAULT_MULTIPART_BYTES = 8 * 1024 * 1024;
/** Longest presigned URL lifetime S3 allows (7 days), in seconds. */
export const MAX_PRESIGN_EXPIRES_S = 604_800;

/** Options of {@link openStore}; each defaults to its environment variable. */
export interface StoreOptions {
  endpoint?: string;
  bucket?: string;
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Folder of the embedded server when there is no endpoint (default `SEED_DATA_DIR`). */
  dataDir?: string;
  /** Objects of at least this many bytes go multipart; also the part size (≥ 5 MiB). */
  multipartBytes?: number;
  /**
   * The folder of the embedded s3rver serving this store (set by openStore for the embedded
   * server): where the sweeper finds multipart uploads s3rver cannot list (jobs/sweeper.ts).
   */
  localDirectory?: string;
}

/** What an upload stored. */
export interface StoredObject {
  key: string;
  bytes: number;
  /** Lowercase hex SHA-256 of the bytes. */
  sha256: string;
  /** Parts uploaded: 1 for a single PUT, more for a multipart upload. */
  parts: number;
}

/** Hex SHA-256 of bytes. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** An S3-compatible store bound to one bucket. */
export class ArtifactStore {
  /** The bucket every key lives in. */
  readonly bucket: string;
  /** Multipart threshold and part size in bytes. */
  readonly multipartBytes: number;
  /** See {@link StoreOptions.localDirectory}. */
  readonly localDirectory?: string;
  #client: S3Client;
  #endpoint: string;
  #options: StoreOptions & {
    region: string;
    credentials: { accessKeyId: string; secretAccessKey: string };
  };
  #rediscover?: () => Promise<string>;
  #stopLocal?: () => Promise<void>;

  /** Use {@link openStore}; this constructor does no I/O. */
  constructor(
    endpoint: string,
    options: StoreOptions & {
      bucket: string;
      region: string;
      credentials: { accessKeyId: string; secretAccessKey: string };
      rediscover?: () => Promise<string>;
      stopLocal?: () => Promise<void>;
    },
  ) {
    this.bucket = options.bucket;
    this.localDirectory = options.localDirectory;
    this.multipartBytes = Math.max(
      5 * 1024 * 1024,
      options.multipartBytes ?? DEFAULT_MULTIPART_BYTES,
    );
    this.#options = options;
    this.#endpoint = endpoint;
    this.#client = this.#makeClient(endpoint);
    this.#rediscover = options.rediscover;
    this.#stopLocal = options.stopLocal;
  }

  /** The endpoint currently in use, e.g. `http://127.0.0.1:4568`. */
  get endpoint(): string {
    return this.#endpoint;
  }

  /** The underlying SDK client (for operations this class does not wrap). */
  get client(): S3Client {
    return this.#client;
  }

  #makeClient(endpoint: string): S3Client {
    return new S3Client({
      endpoint,
      region: this.#options.region,
      credentials: this.#options.credentials,
      forcePathStyle: true,
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  /**
   * Sends a command; when the embedded server of another process went away (connection refused),
   * finds or starts the data folder's server again and retries once.
   */
  // deno-lint-ignore no-explicit-any
  async send<T>(command: any): Promise<T> {
    try {
      return await this.#client.send(command) as T;
    } catch (e) {
      if (!this.#rediscover || !isConnectionRefused(e)) throw e;
      this.#endpoint = await this.#rediscover();
      this.#client.destroy();
      this.#client = this.#makeClient(this.#endpoint);
      return await this.#client.send(command) as T;
    }
  }

  /** Creates the bucket when it does not exist. */
  async ensureBucket(): Promise<void> {
    try {
      await this.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      try {
        await this.send(new CreateBucketCommand({ Bucket: this.bucket }));
      } catch (e) {
        const name = (e as { name?: string }).name;
        if (name !== "BucketAlreadyOwnedByYou" && name !== "BucketAlreadyExists") throw e;
      }
    }
  }

  /**
   * Uploads bytes (multipart at or above {@link multipartBytes}) and returns size and SHA-256.
   * A failed multipart upload is aborted (no partial object is left).
   */
  async put(
    key: string,
    body: Uint8Array,
    options: { contentType?: string } = {},
  ): Promise<StoredObject> {
    const sha256 = sha256Hex(body);
    const common = {
      Bucket: this.bucket,
      Key: key,
      ContentType: options.contentType ?? "application/octet-stream",
      Metadata: { sha256 },
    };
    if (body.byteLength < this.multipartBytes) {
      await this.send(
        new PutObjectCommand({ ...common, Body: body, ContentLength: body.byteLength }),
      );
      return { key, bytes: body.byteLength, sha256, parts: 1 };
    }
    const size = this.multipartBytes;
    const slices = function* () {
      for (let at = 0; at < body.byteLength; at += size) yield body.subarray(at, at + size);
    };
    const parts = await uploadMultipart((c) => this.send(c), {
      bucket: this.bucket,
      key,
      contentType: common.ContentType,
      metadata: common.Metadata,
    }, slices());
    return { key, bytes: body.byteLength, sha256, parts };
  }

  /**
   * Uploads a stream of chunks (a Node `Readable` is an async iterable) without holding it whole:
   * chunks are gathered into parts of {@link multipartBytes}; a stream shorter than that is one
   * PUT. Returns size and SHA-256 (computed on the fly). A failed upload is aborted.
   */
  async putStream(
    key: string,
    source: AsyncIterable<Uint8Array>,
    options: { contentType?: string } = {},
  ): Promise<StoredObject> {
    const contentType = options.contentType ?? "application/octet-stream";
    const hash = createHash("sha256");
    let total = 0;
    const parts = regroup(source, this.multipartBytes, (chunk) => {
      hash.update(chunk);
      total += chunk.byteLength;
    });
    // Peek at the first part: a stream shorter than one part is a single PUT.
    const first = await parts.next();
    const firstPart = first.done ? new Uint8Array(0) : first.value;
    if (firstPart.byteLength < this.multipartBytes) {
      await parts.return(undefined);
      const sha256 = hash.digest("hex");
      await this.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: firstPart,
          ContentLength: firstPart.byteLength,
          ContentType: contentType,
          Metadata: { sha256 },
        }),
      );
      return { key, bytes: total, sha256, parts: 1 };
    }
    async function* all() {
      yield firstPart;
      yield* parts;
    }
    // The hash is known only at the end, so it is not stored as object metadata here.
    const count = await uploadMultipart((c) => this.send(c), {
      bucket: this.bucket,
      key,
      contentType,
    }, all());
    return { key, bytes: total, sha256: hash.digest("hex"), parts: count };
  }

  /**
   * Uploads a file from disk without holding it whole ({@link putStream}: parts of
   * {@link multipartBytes}, so memory is bounded by one part whatever the file's size, and time is
   * linear in it). Returns size and SHA-256 (computed as it is read).
   */
  async putFile(
    key: string,
    path: string,
    options: { contentType?: string } = {},
  ): Promise<StoredObject> {
    const file = await Deno.open(path, { read: true });
    // The readable closes the file when it ends or is cancelled (putStream returns early).
    return await this.putStream(key, file.readable, options);
  }

  /**
   * Downloads an object to a file without holding it whole, verifying it against `sha256` when
   * given (the file is removed on a mismatch).
   * @throws IntegrityError when the bytes do not hash to `sha256`.
   * @throws the SDK's `NoSuchKey` when the object does not exist.
   */
  async getToFile(
    key: string,
    path: string,
    options: { sha256?: string } = {},
  ): Promise<{ bytes: number; sha256: string }> {
    const body = await this.getStream(key);
    const hash = createHash("sha256");
    let bytes = 0;
    const file = await Deno.open(path, { write: true, create: true, truncate: true });
    try {
      for await (const chunk of body) {
        hash.update(chunk);
        bytes += chunk.byteLength;
        for (let at = 0; at < chunk.byteLength;) at += await file.write(chunk.subarray(at));
      }
    } finally {
      file.close();
    }
    const sha256 = hash.digest("hex");
    if (options.sha256 !== undefined && sha256 !== options.sha256) {
      await Deno.remove(path).catch(() => {});
      throw new IntegrityError(key, options.sha256, sha256);
    }
    return { bytes, sha256 };
  }

  /**
   * Reads an object whole. With `sha256`, verifies it.
   * @throws IntegrityError when the bytes do not hash to `sha256`.
   * @throws the SDK's `NoSuchKey` when the object does not exist.
   */
  async get(key: string, options: { sha256?: string } = {}): Promise<Uint8Array> {
    const res = await this.send<{ Body: { transformToByteArray(): Promise<Uint8Array> } }>(
      new GetObjectCommand({ Bucket: this.bucket, Key: key }),
    );
    const bytes = await res.Body.transformToByteArray();
    if (options.sha256 !== undefined) {
      const actual = sha256Hex(bytes);
      if (actual !== options.sha256) throw new IntegrityError(key, options.sha256, actual);
    }
    return bytes;
  }

  /** Streams an object (no verification; hash the stream yourself to verify). */
  async getStream(key: string): Promise<ReadableStream<Uint8Array>> {
    const res = await this.send<{ Body: { transformToWebStream(): ReadableStream<Uint8Array> } }>(
      new GetObjectCommand({ Bucket: this.bucket, Key: key }),
    );
    return res.Body.transformToWebStream();
  }

  /**
   * A presigned GET URL valid for `expiresInS` seconds (1…604800) from `signedAt` (default now).
   * `filename` sets the download's Content-Disposition.
   */
  async presignGet(
    key: string,
    options: { expiresInS: number; filename?: string; signedAt?: Date },
  ): Promise<string> {
    const { expiresInS } = options;
    if (!Number.isInteger(expiresInS) || expiresInS < 1 || expiresInS > MAX_PRESIGN_EXPIRES_S) {
      throw new RangeError(
        `Cannot presign ${key} as expiresInS must be an integer in 1…${MAX_PRESIGN_EXPIRES_S}: current value is ${expiresInS}`,
      );
    }
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ResponseContentDisposition: options.filename
        ? `attachment; filename="${options.filename.replace(/["\\\r\n]/g, "_")}"`
        : undefined,
    });
    return await getSignedUrl(this.#client, command, {
      expiresIn: expiresInS,
      signingDate: options.signedAt,
    });
  }

  /** Keys under a prefix (all pages), sorted. */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const res = await this.send<
        { Contents?: { Key?: string }[]; NextContinuationToken?: string }
      >(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of res.Contents ?? []) if (o.Key) keys.push(o.Key);
      token = res.NextContinuationToken;
    } while (token);
    return keys.sort();
  }

  /** Objects under a prefix (all pages) with size and last-modified time, sorted by key. */
  async listObjects(prefix: string): Promise<{ key: string; bytes: number; lastModified: Date }[]> {
    const out: { key: string; bytes: number; lastModified: Date }[] = [];
    let token: string | undefined;
    do {
      const res = await this.send<{
        Contents?: { Key?: string; Size?: number; LastModified?: Date }[];
        NextContinuationToken?: string;
      }>(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of res.Contents ?? []) {
        if (o.Key) {
          out.push({
            key: o.Key,
            bytes: o.Size ?? 0,
            lastModified: o.LastModified ?? new Date(0),
          });
        }
      }
      token = res.NextContinuationToken;
    } while (token);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Deletes an object (no error when it is absent). */
  async delete(key: string): Promise<void> {
    await this.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /** Closes the client and stops the embedded server if this process started it. */
  async close(): Promise<void> {
    this.#client.destroy();
    await this.#stopLocal?.();
  }
}

function isConnectionRefused(e: unknown): boolean {
  const err = e as { code?: string; cause?: { code?: string }; message?: string };
  return err?.code === "ECONNREFUSED" || err?.cause?.code === "ECONNREFUSED" ||
    /ECONNREFUSED|Connection refused/i.test(String(err?.message ?? ""));
}

/** S3's rule for bucket names (besides "no two dots in a row"), checked before any request. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * Opens the store named by `options` or the environment (see module doc) and creates the bucket
 * when missing. Without an endpoint, finds or starts the data folder's embedded server.
 * @throws ConfigurationError when the bucket name breaks S3's naming rule (before any I/O).
 */
export async function openStore(options: StoreOptions = {}): Promise<ArtifactStore> {
  const env = (name: string) => Deno.env.get(name) || undefined;
  const endpoint = options.endpoint ?? env("S3_ENDPOINT");
  const bucket = options.bucket ?? env("S3_BUCKET") ?? "seed";
  const region = options.region ?? env("S3_REGION") ?? "us-east-1";
  if (!BUCKET_NAME.test(bucket) || bucket.includes("..")) {
    throw new ConfigurationError(
      "S3_BUCKET",
      "3–63 lowercase letters, digits, dots or hyphens, starting and ending with a letter or digit",
      bucket,
    );
  }
  let store: ArtifactStore;
  if (endpoint) {
    const accessKeyId = options.accessKeyId ?? env("S3_ACCESS_KEY_ID");
    const secretAccessKey = options.secretAccessKey ?? env("S3_SECRET_ACCESS_KEY");
    if (!accessKeyId || !secretAccessKey) {
      throw new Error(
        `Cannot open the artifact store at ${endpoint} as S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY must be set`,
      );
    }
    store = new ArtifactStore(endpoint, {
      ...options,
      bucket,
      region,
      credentials: { accessKeyId, secretAccessKey },
    });
  } else {
    const dataDir = options.dataDir ?? dataDirFromEnv();
    const local = await ensureLocalS3(dataDir);
    store = new ArtifactStore(local.endpoint, {
      ...options,
      bucket,
      region,
      credentials: { ...local.credentials },
      localDirectory: localStoreDir(dataDir),
      rediscover: async () => (await ensureLocalS3(dataDir)).endpoint,
      stopLocal: () => local.stop(),
    });
  }
  await store.ensureBucket();
  return store;
}

/** Where the embedded store keeps objects for a data folder. */
export function localStoreDir(dataDir: string): string {
  return join(dataDir, "s3");
}
