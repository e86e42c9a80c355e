/**
 * Trajectory dumps: what the policy saw and did at a step, for people to look at. Each dump is
 * one JSON object (`rollout`: the training rollouts of an update; `eval`: a step's evaluation
 * results and eval trajectories) plus one PNG object per observation image, all keyed by the
 * writing attempt (keys.ts). As for checkpoints (artifacts.ts), the objects are uploaded first
 * and the row, inserted under the worker's fence, is the commit point: a stale worker's dump is
 * refused ({@link FenceLostError}) and its uploads stay invisible garbage. A rerun of a step (a
 * resumed job) replaces the step's row.
 */
import { FENCED } from "./artifacts.ts";
import type { Queryable } from "./db.ts";
import { type Fence, FenceLostError } from "./errors.ts";
import { evalKey, trajectoriesKey, trajectoryImageKey } from "./keys.ts";
import { toDate } from "./_rows.ts";
import type { TrajectoryDump, TrajectoryDumpKind, TrajectoryImage } from "./schema.ts";
import type { ArtifactStore } from "./store.ts";
import type { Writer } from "./artifacts.ts";

const SQL = {
  /** commitTrajectoryDump: the dump's row, under the fence; a rerun of a step replaces it. */
  commit: `insert into trajectory_dumps
      (job_id, step, kind, attempt, key, bytes, sha256, trajectory_count, images)
    select id, $4::int, $5::text, attempt, $6::text, $7::bigint, $8::text, $9::int, $10::jsonb
    from (${FENCED}) fenced
    on conflict (job_id, step, kind) do update
      set attempt = excluded.attempt, key = excluded.key, bytes = excluded.bytes,
          sha256 = excluded.sha256, trajectory_count = excluded.trajectory_count,
          images = excluded.images, created_at = now()
    returning *`,
  /** listTrajectoryDumps: every committed dump of a job, by step then kind. */
  list: `select * from trajectory_dumps where job_id = $1::uuid order by step, kind`,
  /**
   * listTrajectoryDumpSummaries: the same rows with the image count instead of the image list
   * (up to 256 entries of ~250 bytes per dump, so ~64 KB a row: megabytes to gigabytes for a
   * long vision job, when a listing needs only the count).
   */
  summaries: `select id, job_id, step, kind, attempt, key, bytes, sha256, trajectory_count,
      jsonb_array_length(images) as image_count, created_at
    from trajectory_dumps where job_id = $1::uuid order by step, kind`,
  /** trajectoryDumpsAt: the committed dumps (at most one per kind) of one step. */
  at: `select * from trajectory_dumps where job_id = $1::uuid and step = $2::int order by kind`,
} as const;

/** An observation image to store with a dump. */
export interface TrajectoryImageInput {
  /** Name within the step; must start with `{kind}-` and end in `.png`, e.g. `rollout-0-2.png`. */
  name: string;
  /** The PNG file. */
  bytes: Uint8Array;
  /** Pixels. */
  width: number;
  height: number;
}

/** A dump to store (see module doc). */
export interface TrajectoryDumpInput {
  /** Step (0 = after warm-up; only `eval` dumps exist at step 0). */
  step: number;
  kind: TrajectoryDumpKind;
  /** The JSON object (serialised as is). */
  json: unknown;
  /** Trajectories in `json` (shown in listings). */
  trajectoryCount: number;
  images: TrajectoryImageInput[];
}

/** Thrown when a dump's image names are not unique, not PNG names or not prefixed by its kind. */
export class TrajectoryDumpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TrajectoryDumpError";
  }
}

function checkImageNames(dump: TrajectoryDumpInput): void {
  const seen = new Set<string>();
  for (const { name } of dump.images) {
    if (!name.startsWith(`${dump.kind}-`) || !name.endsWith(".png")) {
      throw new TrajectoryDumpError(
        `Cannot save the ${dump.kind} dump of step ${dump.step} as image names must look like ${dump.kind}-….png: current value is "${name}"`,
      );
    }
    if (seen.has(name)) {
      throw new TrajectoryDumpError(
        `Cannot save the ${dump.kind} dump of step ${dump.step} as image names must be unique: "${name}" repeats`,
      );
    }
    seen.add(name);
  }
}

/** A dump whose objects are uploaded and whose row is not yet committed. */
export interface UploadedDump {
  step: number;
  kind: TrajectoryDumpKind;
  key: string;
  bytes: number;
  sha256: string;
  trajectoryCount: number;
  images: TrajectoryImage[];
}

/**
 * Uploads a dump's images and JSON (keyed by the writer's attempt); commits nothing.
 * @throws TrajectoryDumpError for bad image names; InvalidKeyError for unsafe ones.
 */
export async function uploadTrajectoryDump(
  store: ArtifactStore,
  writer: Writer,
  dump: TrajectoryDumpInput,
): Promise<UploadedDump> {
  const { fence, tenantId } = writer;
  const { step, kind } = dump;
  checkImageNames(dump);
  const at = { attempt: fence.attempt };
  const images: TrajectoryImage[] = [];
  for (const image of dump.images) {
    const key = trajectoryImageKey(tenantId, fence.jobId, step, image.name, at);
    const { bytes, sha256 } = await store.put(key, image.bytes, { contentType: "image/png" });
    images.push({ name: image.name, key, bytes, sha256, width: image.width, height: image.height });
  }
  const key = kind === "eval"
    ? evalKey(tenantId, fence.jobId, step, at)
    : trajectoriesKey(tenantId, fence.jobId, step, at);
  const body = new TextEncoder().encode(JSON.stringify(dump.json));
  const { bytes, sha256 } = await store.put(key, body, { contentType: "application/json" });
  return { step, kind, key, bytes, sha256, trajectoryCount: dump.trajectoryCount, images };
}

/**
 * Commits an uploaded dump's row under the fence (on the database or a transaction).
 * @throws FenceLostError when the fence no longer holds.
 */
export async function commitDumpRow(
  q: Queryable,
  fence: Fence,
  up: UploadedDump,
): Promise<TrajectoryDump> {
  const rows = await q.query(SQL.commit, [
    fence.jobId,
    fence.attempt,
    fence.workerId,
    up.step,
    up.kind,
    up.key,
    up.bytes,
    up.sha256,
    up.trajectoryCount,
    JSON.stringify(up.images),
  ]);
  if (rows.length === 0) {
    throw new FenceLostError(fence, `commit the ${up.kind} dump of step ${up.step}`);
  }
  return toTrajectoryDump(rows[0]);
}

/**
 * Uploads a dump's images and JSON, then commits its row under the fence.
 * @throws FenceLostError when the fence no longer holds (the uploads are then garbage).
 * @throws TrajectoryDumpError for bad image names; InvalidKeyError for unsafe ones.
 */
export async function saveTrajectoryDump(
  db: Queryable,
  store: ArtifactStore,
  writer: Writer,
  dump: TrajectoryDumpInput,
): Promise<TrajectoryDump> {
  return await commitDumpRow(db, writer.fence, await uploadTrajectoryDump(store, writer, dump));
}

/** A job's committed dumps, by step then kind. */
export async function listTrajectoryDumps(db: Queryable, jobId: string): Promise<TrajectoryDump[]> {
  return (await db.query(SQL.list, [jobId])).map(toTrajectoryDump);
}

/** A committed dump without its image list (see {@link listTrajectoryDumpSummaries}). */
export type TrajectoryDumpSummary = Omit<TrajectoryDump, "images"> & {
  /** Images stored with the dump. */
  imageCount: number;
};

/**
 * A job's committed dumps, by step then kind, with image counts instead of image lists: what a
 * listing needs, without reading every image's key and hash of every step.
 */
export async function listTrajectoryDumpSummaries(
  db: Queryable,
  jobId: string,
): Promise<TrajectoryDumpSummary[]> {
  return (await db.query(SQL.summaries, [jobId])).map((r) => {
    const { images: _, ...rest } = toTrajectoryDump({ ...r, images: [] });
    return { ...rest, imageCount: Number(r.image_count) };
  });
}

/** The committed dumps of one step (at most one per kind; empty when none). */
export async function getTrajectoryDumps(
  db: Queryable,
  jobId: string,
  step: number,
): Promise<TrajectoryDump[]> {
  return (await db.query(SQL.at, [jobId, step])).map(toTrajectoryDump);
}

/**
 * Reads a dump's JSON, verified against its recorded SHA-256.
 * @throws IntegrityError on a hash mismatch; SyntaxError when the object is not JSON.
 */
export async function readTrajectoryDump(
  store: Pick<ArtifactStore, "get">,
  dump: TrajectoryDump,
): Promise<unknown> {
  const bytes = await store.get(dump.key, { sha256: dump.sha256 });
  return JSON.parse(new TextDecoder().decode(bytes));
}

/**
 * Reads one image (PNG bytes) of a dump, verified against its recorded SHA-256.
 * @throws RangeError when the dump has no such image; IntegrityError on a hash mismatch.
 */
export async function readTrajectoryImage(
  store: Pick<ArtifactStore, "get">,
  dump: TrajectoryDump,
  name: string,
): Promise<Uint8Array> {
  const image = dump.images.find((i) => i.name === name);
  if (!image) {
    throw new RangeError(
      `Cannot read image ${name} of the ${dump.kind} dump of step ${dump.step} as it must be one of its ${dump.images.length} images`,
    );
  }
  return await store.get(image.key, { sha256: image.sha256 });
}

/** Maps a `trajectory_dumps` row (either driver's scalar types). */
function toTrajectoryDump(r: Record<string, unknown>): TrajectoryDump {
  return {
    id: Number(r.id),
    jobId: String(r.job_id),
    step: Number(r.step),
    kind: String(r.kind) as TrajectoryDumpKind,
    attempt: Number(r.attempt),
    key: String(r.key),
    bytes: Number(r.bytes),
    sha256: String(r.sha256),
    trajectoryCount: Number(r.trajectory_count),
    images: (r.images ?? []) as TrajectoryImage[],
    createdAt: toDate(r.created_at)!,
  };
}
