import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { decode } from "fast-png";
import {
  claimJob,
  FenceLostError,
  fenceOf,
  listTrajectoryDumps,
  readTrajectoryDump,
  readTrajectoryImage,
  saveTrajectoryDump,
  TrajectoryDumpError,
} from "../../../../jobs/mod.ts";
import {
  DEFAULT_DUMP_LIMITS,
  type DumpedTrajectory,
  evalDump,
  rolloutDump,
  tokenPieces,
} from "../../../../workers/seed/run/trajectory_dump.ts";
import type { SplitEval } from "../../../../workers/seed/evaluate.ts";
import { buildByteLevelTokenizer, Tokenizer } from "../../../../workers/model/mod.ts";
import { createTenant, openTestDatabase } from "../../../_harness/fixtures.ts";
import { startTestStore } from "../../../_harness/s3.ts";
import { imageTrajectories } from "./_image_trajectories.ts";
import { submit, tinySpec } from "../_jobs.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const entries = (json: unknown) => (json as { trajectories: DumpedTrajectory[] }).trajectories;

Deno.test("a rollout dump keeps every field of each turn and names one PNG per image", () => {
  const played = imageTrajectories(2, { actions: ["up", "left"] });
  const dump = rolloutDump("job-1", 3, played);
  assert.equal(dump.kind, "rollout");
  assert.equal(dump.step, 3);
  assert.equal(dump.trajectoryCount, 2);
  const [first] = entries(dump.json);
  const source = played[0];
  assert.equal(first.task_id, source.task.id);
  assert.equal(first.split, "train");
  assert.equal(first.family, source.task.family);
  assert.equal(first.group, 0);
  assert.equal(first.turns, source.steps.length);
  assert.equal(first.won, source.won);
  assert.equal(first.reward_sum, source.steps.reduce((s, x) => s + x.reward, 0));
  assert.deepEqual(first.steps[1], {
    turn: 2,
    observation: source.steps[1].observation,
    response: "<action>left</action>",
    action: "left",
    valid: source.steps[1].valid,
    reward: source.steps[1].reward,
    image: "rollout-0-1.png",
  });
  // 2 trajectories × 2 turns, each turn's observation had an image.
  assert.deepEqual(dump.images.map((i) => i.name), [
    "rollout-0-0.png",
    "rollout-0-1.png",
    "rollout-1-0.png",
    "rollout-1-1.png",
  ]);
});

Deno.test("each dumped PNG decodes to the observation image's size and pixels", () => {
  const played = imageTrajectories(1, { actions: ["up"] });
  const rgb = played[0].steps[0].images![0];
  const [png] = rolloutDump("job-1", 1, played).images;
  const decoded = decode(png.bytes);
  assert.equal(decoded.width, rgb.width);
  assert.equal(decoded.height, rgb.height);
  assert.equal(decoded.channels, 3);
  assert.deepEqual(new Uint8Array(decoded.data), rgb.rgb);
  assert.equal(png.width, rgb.width);
  assert.equal(png.height, rgb.height);
});

Deno.test("a rollout dump is bounded in trajectories, text and images", () => {
  const played = imageTrajectories(5, { actions: ["up", "left", "down"] });
  const [head, ...rest] = played[0].steps;
  played[0] = { ...played[0], steps: [{ ...head, response: "x".repeat(50) }, ...rest] };
  const limits = { ...DEFAULT_DUMP_LIMITS, maxTrajectories: 3, maxFieldChars: 10, maxImages: 4 };
  const dump = rolloutDump("job-1", 1, played, limits);
  const json = dump.json as { total_trajectories: number; images_omitted: number };
  assert.equal(dump.trajectoryCount, 3);
  assert.equal(json.total_trajectories, 5);
  const kept = entries(dump.json);
  assert.deepEqual(kept.map((t) => t.group), [0, 1, 2]);
  assert.equal(kept[0].steps[0].response, `${"x".repeat(10)}…`);
  assert.equal(dump.images.length, 4);
  const turns = kept.reduce((n, t) => n + t.turns, 0);
  assert.equal(json.images_omitted, turns - 4);
  assert.equal(kept.flatMap((t) => t.steps).filter((s) => s.image !== null).length, 4);
});

Deno.test("a turn's feedback (the analyzer's Effect line) is dumped, cut like the observation", () => {
  const played = imageTrajectories(1, { actions: ["up", "left", "down"] });
  const steps = played[0].steps;
  played[0] = {
    ...played[0],
    steps: [
      { ...steps[0], feedback: "pushed the box up" },
      { ...steps[1], feedback: "<b>walked</b> left\n" + "x".repeat(50) },
      steps[2],
    ],
  };
  const limits = { ...DEFAULT_DUMP_LIMITS, maxFieldChars: 30 };
  const [t] = entries(rolloutDump("job-1", 1, played, limits).json);
  assert.equal(t.steps[0].feedback, "pushed the box up");
  // Kept as text (the viewer shows it as a text node), cut at maxFieldChars.
  assert.equal(t.steps[1].feedback, `${("<b>walked</b> left\n" + "x".repeat(50)).slice(0, 30)}…`);
  assert.ok(!("feedback" in t.steps[2]), "a turn without feedback has no key");
});

Deno.test("an eval dump holds the split results and at most maxPerSplit episodes of each", () => {
  const seen = imageTrajectories(3, { split: "test_seen" });
  const unseen = imageTrajectories(2, { split: "test_unseen" });
  const splits: SplitEval[] = [
    { split: "test_seen", episodes: 3, success_rate: 0, score: -0.3, mean_turns: 3, families: {} },
    {
      split: "test_unseen",
      episodes: 2,
      success_rate: 0,
      score: -0.3,
      mean_turns: 3,
      families: {},
    },
  ];
  const limits = { ...DEFAULT_DUMP_LIMITS, maxPerSplit: 2 };
  const dump = evalDump("job-1", 4, { splits, trajectories: [...seen, ...unseen] }, limits);
  assert.equal(dump.kind, "eval");
  assert.equal(dump.trajectoryCount, 4);
  const json = dump.json as { splits: SplitEval[]; total_trajectories: number };
  assert.deepEqual(json.splits, splits);
  assert.equal(json.total_trajectories, 5);
  assert.deepEqual(entries(dump.json).map((t) => t.split), [
    "test_seen",
    "test_seen",
    "test_unseen",
    "test_unseen",
  ]);
  assert.ok(dump.images.every((i) => i.name.startsWith("eval-")));
});

Deno.test("stored dumps", async (t) => {
  const { db, close } = await openTestDatabase();
  const s3 = await startTestStore();
  try {
    const tenantId = await createTenant(db);
    const job = await submit(db, tenantId, tinySpec());
    const claimed = await claimJob(db, { workerId: "w-1", device: "cpu", leaseMs: 60_000 });
    assert.equal(claimed?.id, job.id);
    const writer = { fence: fenceOf(claimed!), tenantId };
    const dump = rolloutDump(job.id, 1, imageTrajectories(2, { actions: ["up"] }));

    await t.step(
      "a dump is committed with attempt-scoped keys and hash-checked images",
      async () => {
        const row = await saveTrajectoryDump(db, s3.store, writer, dump);
        assert.equal(row.kind, "rollout");
        assert.equal(row.trajectoryCount, 2);
        assert.match(row.key, new RegExp(`/jobs/${job.id}/trajectories/step-1/attempt-0\\.json$`));
        assert.deepEqual(await readTrajectoryDump(s3.store, row), dump.json);
        assert.equal(row.images.length, 2);
        const png = await readTrajectoryImage(s3.store, row, "rollout-1-0.png");
        assert.equal(sha(png), row.images[1].sha256);
        assert.deepEqual(png, dump.images[1].bytes);
        assert.match(
          row.images[1].key,
          /trajectories\/step-1\/attempt-0\/images\/rollout-1-0\.png$/,
        );
      },
    );

    await t.step("a stale worker's dump is refused and no row appears", async () => {
      const stale = { ...writer, fence: { ...writer.fence, workerId: "w-gone" } };
      const late = rolloutDump(job.id, 2, imageTrajectories(1, { actions: ["up"] }));
      await assert.rejects(() => saveTrajectoryDump(db, s3.store, stale, late), FenceLostError);
      const old = { ...writer, fence: { ...writer.fence, attempt: writer.fence.attempt + 1 } };
      await assert.rejects(() => saveTrajectoryDump(db, s3.store, old, late), FenceLostError);
      assert.deepEqual((await listTrajectoryDumps(db, job.id)).map((d) => d.step), [1]);
    });

    await t.step("image names that break the layout are refused before any upload", async () => {
      const bad = { ...dump, images: [{ ...dump.images[0], name: "eval-0-0.png" }] };
      await assert.rejects(
        () => saveTrajectoryDump(db, s3.store, writer, bad),
        TrajectoryDumpError,
      );
      const twice = { ...dump, images: [dump.images[0], dump.images[0]] };
      await assert.rejects(
        () => saveTrajectoryDump(db, s3.store, writer, twice),
        TrajectoryDumpError,
      );
    });
  } finally {
    await close();
    await s3.close();
  }
});

Deno.test("a SEED rollout dump carries each analysis and the re-scored turns' tokens with their teacher gaps", () => {
  const files = buildByteLevelTokenizer(["up", "left", "<action>", "</action>"]);
  const enc = new TextEncoder();
  const tokenizer = Tokenizer.fromBytes(
    enc.encode(JSON.stringify(files.tokenizerJson)),
    enc.encode(JSON.stringify(files.tokenizerConfig)),
  );
  const played = imageTrajectories(2, { actions: ["up", "left"] });
  // "é" is two bytes, and "✓" three: byte-level tokens that only decode together.
  const response = "<action>left</action> é✓";
  const ids = tokenizer.encode(response, { addSpecialTokens: false });
  const gaps = Float32Array.from(ids, (_, i) => (i % 2 === 0 ? 0.5 : -0.25) + i / 3);
  const dump = rolloutDump("job-1", 3, played, DEFAULT_DUMP_LIMITS, {
    analyses: new Map([
      [played[0].id, { episode_summary: "went left", episode_skill: "push <b>left</b> first" }],
      [played[1].id, null],
    ]),
    raw: new Map([[played[0].id, "{...}"], [played[1].id, "not json"]]),
    tokenGaps: [
      { trajectoryId: played[0].id, turn: 0, responseIds: [], gaps: [], stepSkill: "go up" },
      { trajectoryId: played[0].id, turn: 1, responseIds: ids, gaps },
    ],
    decode: (x) => tokenizer.decode(x),
  });
  const [first, second] = entries(dump.json);
  // Turn 1 (0-based 0) was scored under a critical-step skill, turn 2 under the episode skill.
  assert.equal(first.steps[0].step_skill, "go up");
  assert.equal(first.steps[1].step_skill, undefined);
  assert.deepEqual(first.analysis, {
    skill: "push <b>left</b> first",
    summary: "went left",
    raw: "{...}",
  });
  assert.deepEqual(second.analysis, { skill: null, summary: null, raw: "not json" });
  const turn = first.steps[1];
  assert.equal(turn.response_tokens!.length, ids.length);
  assert.equal(turn.response_tokens!.join(""), response);
  assert.ok(turn.response_tokens!.includes("left"), JSON.stringify(turn.response_tokens));
  assert.deepEqual(turn.teacher_gaps, Array.from(gaps, (g) => Math.round(g * 1e4) / 1e4));
  assert.equal(second.steps[1].teacher_gaps, undefined);
});

Deno.test("an analysis written without a summary is dumped with its skill and a null summary", () => {
  const [played] = imageTrajectories(1, { actions: ["up"] });
  const dump = rolloutDump("job-1", 1, [played], DEFAULT_DUMP_LIMITS, {
    analyses: new Map([[played.id, { episode_summary: "", episode_skill: "push up first" }]]),
    raw: new Map([[played.id, '{"episode_skill": "push up first"}']]),
    tokenGaps: [],
    decode: () => "",
  });
  const [only] = entries(dump.json);
  assert.deepEqual(only.analysis, {
    skill: "push up first",
    summary: null,
    raw: '{"episode_skill": "push up first"}',
  });
});

Deno.test("token pieces put a character split over byte tokens on the token that completes it", () => {
  const files = buildByteLevelTokenizer(["a"]);
  const enc = new TextEncoder();
  const tokenizer = Tokenizer.fromBytes(
    enc.encode(JSON.stringify(files.tokenizerJson)),
    enc.encode(JSON.stringify(files.tokenizerConfig)),
  );
  const ids = tokenizer.encode("a✓", { addSpecialTokens: false });
  assert.equal(ids.length, 4, "a + the three bytes of ✓");
  assert.deepEqual(tokenPieces(ids, (x) => tokenizer.decode(x)), ["a", "", "", "✓"]);
});
