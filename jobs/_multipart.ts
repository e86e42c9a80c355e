/**
 * Internal: S3 multipart uploads for the artifact store — regrouping a stream of chunks into parts
 * of a fixed size, and uploading parts with abort on failure (no partial object is left).
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
} from "@aws-sdk/client-s3";

/** Sends one SDK command (the store's retrying `send`). */
// deno-lint-ignore no-explicit-any
export type Send = <T>(command: any) => Promise<T>;

/**
 * Regroups chunks into parts of exactly `partBytes` (the last may be shorter), calling `onChunk`
 * with every input chunk (for hashing). Holds at most one part plus one chunk in memory.
 */
export async function* regroup(
  source: AsyncIterable<Uint8Array>,
  partBytes: number,
  onChunk: (chunk: Uint8Array) => void,
): AsyncGenerator<Uint8Array> {
  let part = new Uint8Array(partBytes);
  let filled = 0;
  for await (const chunk of source) {
    onChunk(chunk);
    for (let at = 0; at < chunk.byteLength;) {
      const n = Math.min(partBytes - filled, chunk.byteLength - at);
      part.set(chunk.subarray(at, at + n), filled);
      filled += n;
      at += n;
      if (filled === partBytes) {
        yield part;
        part = new Uint8Array(partBytes);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield part.subarray(0, filled);
}

/**
 * Uploads `parts` as one multipart object and returns the number of parts. Every part but the
 * last must be ≥ 5 MiB (S3's rule). On any failure the upload is aborted and the error rethrown.
 */
export async function uploadMultipart(
  send: Send,
  target: { bucket: string; key: string; contentType: string; metadata?: Record<string, string> },
  parts: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): Promise<number> {
  const { bucket, key } = target;
  const { UploadId } = await send<{ UploadId: string }>(
    new CreateMultipartUploadCommand({
      Bucket: bucket,
      Key: key,
      ContentType: target.contentType,
      Metadata: target.metadata,
    }),
  );
  const done: { ETag: string; PartNumber: number }[] = [];
  try {
    for await (const body of parts) {
      const PartNumber = done.length + 1;
      const { ETag } = await send<{ ETag: string }>(
        new UploadPartCommand({
          Bucket: bucket,
          Key: key,
          UploadId,
          PartNumber,
          Body: body,
          ContentLength: body.byteLength,
        }),
      );
      done.push({ ETag, PartNumber });
    }
    await send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: done },
      }),
    );
    return done.length;
  } catch (e) {
    await send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }))
      .catch(() => {});
    throw e;
  }
}
