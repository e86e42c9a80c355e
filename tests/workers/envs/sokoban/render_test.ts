import assert from "node:assert/strict";
import { encodePng, IMAGE_PLACEHOLDER, SPLITS } from "../../../../workers/envs/mod.ts";
import { wordsOf } from "../../../../workers/envs/prompt.ts";
import { pixelAt, type RgbImage } from "../../../../workers/envs/raster.ts";
import {
  SOKOBAN_IMAGE_SYSTEM_LINE,
  sokobanEnvironment as env,
} from "../../../../workers/envs/sokoban/mod.ts";
import {
  type CellKind,
  SOKOBAN_PALETTE,
  SOKOBAN_TILE_PX,
} from "../../../../workers/envs/sokoban/render.ts";
import { SYMBOLS } from "../../../../workers/envs/sokoban/room.ts";
import type { Observation, Task } from "../../../../workers/envs/types.ts";
import { rollout } from "./_rollout.ts";

const IMAGE = { render: "image" };
const KIND_OF_SYMBOL = new Map(
  Object.entries(SYMBOLS).map(([kind, symbol]) => [symbol as string, kind as CellKind]),
);

async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new Uint8Array(bytes));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Asserts every pixel of every tile has the palette colour of the grid symbol of its cell. */
function assertTilesMatchGrid(obs: Observation): void {
  const rows = obs.text.split("\n").map((row) => row.split(" "));
  const image = obs.image as RgbImage;
  assert.equal(image.width, rows.length * SOKOBAN_TILE_PX);
  assert.equal(image.height, rows.length * SOKOBAN_TILE_PX);
  rows.forEach((cells, r) =>
    cells.forEach((symbol, c) => {
      const expected = SOKOBAN_PALETTE[KIND_OF_SYMBOL.get(symbol)!].rgb;
      for (let dy = 0; dy < SOKOBAN_TILE_PX; dy++) {
        for (let dx = 0; dx < SOKOBAN_TILE_PX; dx++) {
          const x = c * SOKOBAN_TILE_PX + dx;
          const y = r * SOKOBAN_TILE_PX + dy;
          assert.deepEqual(pixelAt(image, x, y), [...expected], `cell ${r},${c} (${symbol})`);
        }
      }
    })
  );
}

Deno.test("the seven kinds of cell have seven distinct tile colours", () => {
  const colours = Object.values(SOKOBAN_PALETTE).map((p) => p.rgb.join(","));
  assert.equal(new Set(colours).size, 7);
  assert.equal(new Set(Object.values(SOKOBAN_PALETTE).map((p) => p.name)).size, 7);
});

Deno.test("render text keeps the former task ids and options, render image gets distinct ids", () => {
  const [text] = env.sampleTasks("train", 1, 0);
  const [image] = env.sampleTasks("train", 1, 0, IMAGE);
  const defaults = { size: 6, boxes: 1, end_on_deadlock: true, relative_positions: false };
  assert.deepEqual(text.options, { ...defaults, prompt: "full" });
  assert.match(text.id, /^sokoban\/train\/6x6-1\/\d+$/);
  assert.equal(image.id, text.id.replace("6x6-1/", "6x6-1-image/"));
  assert.deepEqual(image.options, { ...defaults, prompt: "full", render: "image" });
  assert.deepEqual(env.sampleTasks("train", 1, 0, { render: "text" })[0], text);
  const textObs = env.createEpisode(text).reset();
  const imageObs = env.createEpisode(image).reset();
  assert.equal(textObs.image, undefined);
  assert.equal(imageObs.text, textObs.text, "the same level, and the grid stays the text");
  assert.equal(imageObs.image!.width, 48);
});

Deno.test("the same image task renders identical bytes, pinned by their SHA-256 and known cells", async () => {
  const [a] = env.sampleTasks("train", 1, 0, IMAGE);
  const [b] = env.sampleTasks("train", 1, 0, IMAGE);
  const first = env.createEpisode(a).reset();
  const second = env.createEpisode(b).reset();
  assert.deepEqual(second.image!.rgb, first.image!.rgb);
  assert.equal(
    first.text,
    "# # # # # #\n# _ _ _ O #\n# _ _ _ _ #\n# # X _ # #\n# # P _ # #\n# # # # # #",
  );
  // Known cells (row, col): (0,0) wall, (1,4) target, (3,2) box, (4,2) player, (2,1) floor.
  assert.deepEqual(pixelAt(first.image!, 0, 0), [...SOKOBAN_PALETTE.wall.rgb]);
  assert.deepEqual(pixelAt(first.image!, 4 * 8 + 4, 1 * 8 + 4), [...SOKOBAN_PALETTE.target.rgb]);
  assert.deepEqual(pixelAt(first.image!, 2 * 8 + 7, 3 * 8), [...SOKOBAN_PALETTE.box.rgb]);
  assert.deepEqual(pixelAt(first.image!, 2 * 8, 4 * 8 + 7), [...SOKOBAN_PALETTE.player.rgb]);
  assert.deepEqual(pixelAt(first.image!, 1 * 8 + 3, 2 * 8 + 5), [...SOKOBAN_PALETTE.floor.rgb]);
  assert.equal(
    await sha256(first.image!.rgb),
    "69322958f5db7ec47dadc78427dd4a2f2e9487b21476fb5ece5eb95dbb4dcfcc",
  );
  // The PNG holds exactly these pixels (fast-png@8.0.0 writes this file).
  assert.equal(
    await sha256(encodePng(first.image!)),
    "9cfb09436643aed033bc41e1be0bed56cf2381136eafc4aa1272663685e1a361",
  );
});

Deno.test("every tile of every observation of expert episodes has the colour of its grid symbol", () => {
  for (const split of SPLITS) {
    for (const task of env.sampleTasks(split, 30, 11, { ...IMAGE, size: 7, boxes: 2 })) {
      const episode = env.createEpisode(task);
      const expert = env.createExpert(task);
      let obs = episode.reset();
      assertTilesMatchGrid(obs);
      for (let turn = 0; turn < env.defaultMaxTurns; turn++) {
        const r = episode.step(expert.act(obs));
        obs = r.observation;
        assertTilesMatchGrid(obs);
        if (r.done) break;
      }
    }
  }
});

Deno.test("the image prompt shows <image> instead of the grid and the actions as history", () => {
  const [task] = env.sampleTasks("test_unseen", 1, 4, IMAGE);
  const episode = env.createEpisode(task);
  const obs0 = episode.reset();
  const r = episode.step("left");
  const prompt = env.buildPrompt({
    task,
    history: [{
      observation: obs0.text,
      response: "left",
      action: "left",
      valid: true,
      reward: -0.1,
    }],
    observation: r.observation,
    historyLength: 3,
    turn: 2,
  });
  assert.equal(prompt.split("\n")[0], SOKOBAN_IMAGE_SYSTEM_LINE);
  assert.equal(prompt.split(IMAGE_PLACEHOLDER).length, 2);
  assert.ok(!prompt.includes("# #"), prompt);
  assert.match(prompt, /\n\[Action 1: left\]\n/);
  assert.match(SOKOBAN_IMAGE_SYSTEM_LINE, /grey wall, black floor, red target, yellow box/);
  const vocabulary = new Set(env.vocabulary());
  assert.ok(vocabulary.has(IMAGE_PLACEHOLDER));
  for (const word of wordsOf(prompt)) assert.ok(vocabulary.has(word), `missing ${word}`);
});

for (const split of SPLITS) {
  Deno.test(`the expert solves at least 99% of 200 ${split} image tasks`, () => {
    const tasks: Task[] = env.sampleTasks(split, 200, 2026, IMAGE);
    let won = 0;
    for (const task of tasks) {
      const expert = env.createExpert(task);
      if (rollout(env, task, (obs) => `<action>${expert.act(obs)}</action>`).won) won++;
    }
    assert.ok(won / tasks.length >= 0.99, `expert success ${won / tasks.length}`);
  });
}
