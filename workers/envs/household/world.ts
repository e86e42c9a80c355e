/**
 * The household world's building blocks: room kinds, receptacle and object types, the layout
 * pools of each split, and the scenario (layout + objects + goal) a task seed generates.
 *
 * Compared with ALFWorld (Shridhar et al. 2021) the rooms are deliberately small (6–10
 * receptacles, 5–10 objects) so prompts stay short for a tiny policy. A **layout** is a room kind
 * plus its numbered receptacles, generated from a layout index; `train` and `test_seen` draw
 * layouts from one pool and `test_unseen` from a disjoint pool (no shared receptacle set).
 */
import { hash32, Rng } from "../_rng.ts";

/** The four room kinds. */
export type RoomKind = "kitchen" | "bathroom" | "bedroom" | "livingroom";

/** The six ALFWorld task families. */
export type Family =
  | "pick_and_place"
  | "examine_in_light"
  | "clean_then_place"
  | "heat_then_place"
  | "cool_then_place"
  | "pick_two_and_place";

/** All families, in ALFWorld's order. */
export const FAMILIES: readonly Family[] = [
  "pick_and_place",
  "examine_in_light",
  "clean_then_place",
  "heat_then_place",
  "cool_then_place",
  "pick_two_and_place",
];

/** Receptacle types that must be opened before their contents can be seen or used. */
export const OPENABLE_TYPES: ReadonlySet<string> = new Set([
  "cabinet",
  "drawer",
  "fridge",
  "microwave",
  "safe",
]);

/** The tool receptacle each processing family needs (and the verb used with it). */
export const TOOLS: Readonly<Record<string, { type: string; verb: string; adjective: string }>> = {
  clean_then_place: { type: "sinkbasin", verb: "clean", adjective: "clean" },
  heat_then_place: { type: "microwave", verb: "heat", adjective: "hot" },
  cool_then_place: { type: "fridge", verb: "cool", adjective: "cool" },
};

interface RoomSpec {
  /** Receptacle types every room of this kind has (one each). */
  fixed: string[];
  /** Optional receptacle types with their maximum count. */
  optional: Record<string, number>;
  /** Object types found in this room kind. */
  objects: string[];
}

/** Room kinds: fixed and optional receptacles, and the objects that occur there. */
export const ROOMS: Readonly<Record<RoomKind, RoomSpec>> = {
  kitchen: {
    fixed: ["countertop", "fridge", "microwave", "sinkbasin", "stoveburner"],
    optional: { cabinet: 3, drawer: 3, shelf: 2, garbagecan: 1, diningtable: 1, coffeemachine: 1 },
    objects: [
      "apple",
      "bread",
      "egg",
      "lettuce",
      "potato",
      "tomato",
      "mug",
      "cup",
      "bowl",
      "plate",
      "pan",
      "pot",
      "knife",
      "fork",
      "spoon",
      "spatula",
      "saltshaker",
      "dishsponge",
    ],
  },
  bathroom: {
    fixed: ["countertop", "sinkbasin", "toilet"],
    optional: { cabinet: 3, drawer: 2, shelf: 2, towelholder: 1, garbagecan: 1, bathtubbasin: 1 },
    objects: ["soapbar", "cloth", "towel", "toiletpaper", "spraybottle", "candle", "soapbottle"],
  },
  bedroom: {
    fixed: ["bed", "desk", "desklamp"],
    optional: { drawer: 3, shelf: 2, dresser: 1, sidetable: 2, garbagecan: 1, safe: 1 },
    objects: [
      "book",
      "cellphone",
      "pen",
      "pencil",
      "keychain",
      "creditcard",
      "cd",
      "alarmclock",
      "pillow",
      "laptop",
    ],
  },
  livingroom: {
    fixed: ["sofa", "coffeetable", "desklamp"],
    optional: { armchair: 1, sidetable: 2, shelf: 2, drawer: 2, cabinet: 2, garbagecan: 1 },
    objects: [
      "remotecontrol",
      "newspaper",
      "vase",
      "statue",
      "box",
      "keychain",
      "creditcard",
      "watch",
      "book",
      "pillow",
    ],
  },
};

/**
 * Where each object type usually is, per room kind: receptacle types in that room kind, as in
 * ALFWorld, whose scenes put objects by type (apples in the fridge or on the countertop, pans on
 * the stove burner, pillows on the bed). An object starts in one of these with probability
 * {@link USUAL_PLACE_SHARE} when the layout has one, else anywhere. The regularity is what makes
 * a hindsight skill ("the apple was in fridge 1") useful for the next task, as ALFWorld's are.
 */
export const USUAL_PLACES: Readonly<Record<RoomKind, Readonly<Record<string, readonly string[]>>>> =
  {
    kitchen: {
      apple: ["fridge", "countertop"],
      bread: ["countertop", "diningtable"],
      egg: ["fridge"],
      lettuce: ["fridge"],
      potato: ["fridge", "countertop"],
      tomato: ["fridge", "diningtable"],
      mug: ["coffeemachine", "cabinet"],
      cup: ["cabinet", "shelf"],
      bowl: ["cabinet"],
      plate: ["cabinet"],
      pan: ["stoveburner"],
      pot: ["stoveburner"],
      knife: ["drawer", "countertop"],
      fork: ["drawer"],
      spoon: ["drawer"],
      spatula: ["drawer"],
      saltshaker: ["shelf", "countertop"],
      dishsponge: ["sinkbasin"],
    },
    bathroom: {
      soapbar: ["bathtubbasin", "sinkbasin"],
      cloth: ["cabinet"],
      towel: ["towelholder"],
      toiletpaper: ["toilet", "cabinet"],
      spraybottle: ["cabinet"],
      candle: ["shelf", "countertop"],
      soapbottle: ["countertop"],
    },
    bedroom: {
      book: ["shelf", "desk"],
      cellphone: ["bed", "sidetable"],
      pen: ["desk", "drawer"],
      pencil: ["desk", "drawer"],
      keychain: ["dresser", "drawer"],
      creditcard: ["safe", "drawer"],
      cd: ["shelf", "drawer"],
      alarmclock: ["sidetable", "desk"],
      pillow: ["bed"],
      laptop: ["desk", "bed"],
    },
    livingroom: {
      remotecontrol: ["coffeetable", "sofa"],
      newspaper: ["coffeetable", "sofa"],
      vase: ["shelf"],
      statue: ["shelf", "sidetable"],
      box: ["cabinet"],
      keychain: ["sidetable", "drawer"],
      creditcard: ["coffeetable", "drawer"],
      watch: ["sidetable"],
      book: ["shelf", "coffeetable"],
      pillow: ["sofa", "armchair"],
    },
  };

/** Probability that an object starts in one of its {@link USUAL_PLACES} (when the room has one). */
export const USUAL_PLACE_SHARE = 0.8;

/**
 * The usual places of the scenario's goal object type: its {@link USUAL_PLACES} in its room kind,
 * in that order. Knowledge that holds across tasks: a goal object starts in one of them with
 * probability {@link USUAL_PLACE_SHARE} when the layout has one that is not of the target type
 * (no goal object starts in one, see {@link generateScenario}).
 */
export function usualPlaceTypes(scenario: Scenario): readonly string[] {
  return USUAL_PLACES[scenario.layout.room][scenario.goal.objectType] ?? [];
}

/** Object types that can be cleaned, heated or cooled (ALFWorld's affordances, simplified). */
export const CAPABLE: Readonly<Record<string, ReadonlySet<string>>> = {
  clean_then_place: new Set([
    "apple",
    "egg",
    "lettuce",
    "potato",
    "tomato",
    "mug",
    "cup",
    "bowl",
    "plate",
    "pan",
    "pot",
    "knife",
    "fork",
    "spoon",
    "spatula",
    "dishsponge",
    "soapbar",
    "cloth",
  ]),
  heat_then_place: new Set(["apple", "bread", "egg", "potato", "tomato", "mug", "cup", "plate"]),
  cool_then_place: new Set([
    "apple",
    "bread",
    "egg",
    "lettuce",
    "potato",
    "tomato",
    "mug",
    "cup",
    "bowl",
    "plate",
    "pan",
    "pot",
  ]),
};

/** One numbered receptacle, e.g. `{ name: "cabinet 2", type: "cabinet", openable: true }`. */
export interface Receptacle {
  name: string;
  type: string;
  openable: boolean;
}

/** A room kind with its numbered receptacles (sorted by name). */
export interface Layout {
  /** Index of the layout in the generator's sequence (the layout seed's index). */
  index: number;
  room: RoomKind;
  receptacles: Receptacle[];
  /** `room: recep, recep, …`; two layouts with the same signature are the same layout. */
  signature: string;
}

/** A numbered object and the receptacle it starts in. */
export interface PlacedObject {
  name: string;
  type: string;
  location: string;
}

/** What the task asks for. `targetType` is a receptacle type, or `desklamp` for examining. */
export interface Goal {
  family: Family;
  objectType: string;
  targetType: string;
}

/** Everything that defines an episode's initial state. */
export interface Scenario {
  layout: Layout;
  objects: PlacedObject[];
  goal: Goal;
  instruction: string;
}

/** Generates layout number `index` (deterministic). */
export function generateLayout(index: number): Layout {
  const rng = new Rng(hash32(`household/layout/${index}`));
  const room = rng.pick(Object.keys(ROOMS) as RoomKind[]);
  const spec = ROOMS[room];
  const counts = new Map<string, number>(spec.fixed.map((t) => [t, 1]));
  const target = rng.range(6, 10);
  let total = spec.fixed.length;
  for (const type of rng.shuffle(Object.keys(spec.optional))) {
    if (total >= target) break;
    const n = Math.min(rng.range(1, spec.optional[type]), target - total);
    counts.set(type, n);
    total += n;
  }
  const receptacles: Receptacle[] = [];
  for (const [type, n] of counts) {
    for (let k = 1; k <= n; k++) {
      receptacles.push({ name: `${type} ${k}`, type, openable: OPENABLE_TYPES.has(type) });
    }
  }
  receptacles.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const signature = `${room}: ${receptacles.map((r) => r.name).join(", ")}`;
  return { index, room, receptacles, signature };
}

/** Number of distinct layouts in the `train`/`test_seen` pool. */
export const SEEN_LAYOUT_COUNT = 120;
/** Number of distinct layouts in the `test_unseen` pool. */
export const UNSEEN_LAYOUT_COUNT = 40;

function buildPools(): { seen: Layout[]; unseen: Layout[] } {
  const seen: Layout[] = [];
  const unseen: Layout[] = [];
  const signatures = new Set<string>();
  for (let i = 0; seen.length + unseen.length < SEEN_LAYOUT_COUNT + UNSEEN_LAYOUT_COUNT; i++) {
    const layout = generateLayout(i);
    if (signatures.has(layout.signature)) continue; // a duplicate would leak across pools
    signatures.add(layout.signature);
    (seen.length < SEEN_LAYOUT_COUNT ? seen : unseen).push(layout);
  }
  return { seen, unseen };
}

/** Layout pools: `seen` serves `train` and `test_seen`, `unseen` serves `test_unseen` only. */
export const LAYOUT_POOLS: Readonly<{ seen: readonly Layout[]; unseen: readonly Layout[] }> =
  buildPools();

/** True when a room of this layout can host a task of `family`. */
export function supportsFamily(layout: Layout, family: Family): boolean {
  const types = new Set(layout.receptacles.map((r) => r.type));
  if (family === "examine_in_light") return types.has("desklamp");
  const tool = TOOLS[family];
  if (tool !== undefined) {
    return types.has(tool.type) &&
      ROOMS[layout.room].objects.some((o) => CAPABLE[family].has(o));
  }
  return true;
}

/** Receptacle types an object may be put in to finish a task of `family`. */
export function targetTypesFor(layout: Layout, family: Family): string[] {
  const exclude = new Set(["desklamp", TOOLS[family]?.type ?? ""]);
  return [...new Set(layout.receptacles.map((r) => r.type))].filter((t) => !exclude.has(t));
}

const TEMPLATES: Readonly<Record<Family, readonly [string, string]>> = {
  pick_and_place: ["put a {o} in {r}", "put some {o} on {r}"],
  examine_in_light: ["look at {o} under the desklamp", "examine the {o} with the desklamp"],
  clean_then_place: ["put a clean {o} in {r}", "clean some {o} and put it in {r}"],
  heat_then_place: ["put a hot {o} in {r}", "heat some {o} and put it in {r}"],
  cool_then_place: ["put a cool {o} in {r}", "cool some {o} and put it in {r}"],
  pick_two_and_place: ["put two {o} in {r}", "find two {o} and put them in {r}"],
};

/** Every instruction template (for the vocabulary). */
export const INSTRUCTION_TEMPLATES: readonly string[] = Object.values(TEMPLATES).flat();

/**
 * Generates the scenario of one task: family (from `families`), a layout from `pool` that
 * supports it, the goal, the objects and where they start (each in one of its
 * {@link USUAL_PLACES} with probability {@link USUAL_PLACE_SHARE}, else anywhere). No goal object
 * starts inside a receptacle of the target type, so no task is solved at reset.
 */
export function generateScenario(
  seed: number,
  pool: readonly Layout[],
  families: readonly Family[],
): Scenario {
  const rng = new Rng(seed);
  const family = rng.pick(families);
  const layout = rng.pick(pool.filter((l) => supportsFamily(l, family)));
  const roomObjects = ROOMS[layout.room].objects;
  const capable = CAPABLE[family];
  const objectType = rng.pick(
    capable === undefined ? roomObjects : roomObjects.filter((o) => capable.has(o)),
  );
  const targetType = family === "examine_in_light"
    ? "desklamp"
    : rng.pick(targetTypesFor(layout, family));
  const typeCounts: [string, number][] = [
    [objectType, family === "pick_two_and_place" ? rng.range(2, 3) : rng.range(1, 2)],
  ];
  const others = rng.sample(roomObjects.filter((o) => o !== objectType), rng.range(3, 5));
  for (const other of others) typeCounts.push([other, rng.range(1, 2)]);
  const holders = layout.receptacles.filter((r) => r.type !== "desklamp");
  const objects: PlacedObject[] = [];
  for (const [type, n] of typeCounts) {
    const allowed = type === objectType ? holders.filter((r) => r.type !== targetType) : holders;
    const usual = new Set(USUAL_PLACES[layout.room][type] ?? []);
    const usualHolders = allowed.filter((r) => usual.has(r.type));
    for (let k = 1; k <= n; k++) {
      const inUsual = rng.next() < USUAL_PLACE_SHARE && usualHolders.length > 0;
      objects.push({
        name: `${type} ${k}`,
        type,
        location: rng.pick(inUsual ? usualHolders : allowed).name,
      });
    }
  }
  const template = rng.pick(TEMPLATES[family]);
  const instruction = template.replace("{o}", objectType).replace("{r}", targetType);
  return { layout, objects, goal: { family, objectType, targetType }, instruction };
}
