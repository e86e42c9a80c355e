/**
 * The arms of `deno task bench:learn` (pure): each arm is one JobSpec method plus at most one
 * field (workers/seed/README.md, Arms), run from the same warm-up with the same seeds.
 */

/** One arm: the RL job's `method` and the spec fields it sets on top of the bench's. */
export interface Arm {
  method: "grpo" | "gigpo" | "seed";
  /** Merged into the RL job's spec after `--extra` (the arm's own field wins). */
  spec: Record<string, unknown>;
  /** One line for `--help`-style listings and the README. */
  description: string;
}

/** The arms by name, in the order a full comparison lists them. */
export const ARMS: Readonly<Record<string, Arm>> = {
  grpo: { method: "grpo", spec: {}, description: "episode-level advantages only (GRPO)" },
  gigpo: { method: "gigpo", spec: {}, description: "episode + step-level advantages (GiGPO)" },
  seed: {
    method: "seed",
    spec: {},
    description: "episode-level advantages + L_opd, skills by the policy's analyzer (SEED)",
  },
  "seed-gigpo": {
    method: "seed",
    spec: { advantage: { estimator: "gigpo" } },
    description: "SEED on GiGPO's advantages",
  },
  "seed-oracle": {
    method: "seed",
    spec: { seed: { skill_source: "reference" } },
    description: "SEED with the environment's reference skills (oracle)",
  },
};

/** The parsed `--arms` and `--baseline` flags. */
export interface ArmSelection {
  /** Arm names in the order given. */
  arms: string[];
  /** The arm every other arm's paired difference is taken from. */
  baseline: string;
}

/**
 * Parses `--arms` (comma-separated names of {@link ARMS}) and `--baseline` (one of them).
 * Throws `Error` with a message naming the flag when a name is unknown or repeated, the list is
 * empty, or the baseline is not in the list.
 */
export function parseArms(arms: string, baseline: string): ArmSelection {
  const names = arms.split(",").map((a) => a.trim()).filter((a) => a !== "");
  if (names.length === 0) {
    throw new Error(`Cannot use --arms as it must name at least one arm: current value is ${arms}`);
  }
  for (const name of names) {
    if (!(name in ARMS)) {
      throw new Error(
        `Cannot use --arms as each arm must be one of ${
          Object.keys(ARMS).join(", ")
        }: current value is ${name}`,
      );
    }
  }
  if (new Set(names).size !== names.length) {
    throw new Error(`Cannot use --arms as its arms must differ: current value is ${arms}`);
  }
  if (!names.includes(baseline)) {
    throw new Error(
      `Cannot use --baseline as it must be one of --arms (${
        names.join(",")
      }): current value is ${baseline}`,
    );
  }
  return { arms: names, baseline };
}
