import assert from "node:assert/strict";
import {
  bestSkillForFamily,
  rankSkillsForFamily,
  shrunkTeacherGap,
  skillChooser,
  SkillLibrary,
} from "../../../workers/skills/mod.ts";

let trajectory = 0;
/** Records `n` sightings of `skill` in `family` (won or lost, with mean Δ `gap`). */
function see(
  library: SkillLibrary,
  skill: string,
  o: { family: string; won: boolean; gap: number | null; n?: number },
): void {
  for (let i = 0; i < (o.n ?? 1); i++) {
    library.add(skill, {
      step: 1,
      taskId: `${o.family}/train/${i}`,
      family: o.family,
      trajectoryId: `t${trajectory++}`,
      success: o.won,
      meanTeacherGap: o.gap,
    });
  }
}

/** A hand-made library over two families (see each line). */
function library(): SkillLibrary {
  const lib = new SkillLibrary("job-1");
  see(lib, "avoid A", { family: "heat", won: false, gap: 0.9, n: 5 }); // large Δ, but lost only
  see(lib, "workflow once", { family: "heat", won: true, gap: 0.5 }); // 0.5 · 1/2 = 0.25
  see(lib, "workflow often", { family: "heat", won: true, gap: 0.3, n: 9 }); // 0.3 · 9/10 = 0.27
  see(lib, "workflow unmeasured", { family: "heat", won: true, gap: null, n: 20 });
  see(lib, "workflow of cool", { family: "cool", won: true, gap: 2 }); // another family
  return lib;
}

Deno.test("the best skill of a family: workflow first, then Δ shrunk by evidence, unmeasured last", () => {
  const ranked = rankSkillsForFamily(library(), "heat").map((r) => r.text);
  assert.deepEqual(ranked, [
    "workflow often", // 0.27 beats 0.25 although its mean Δ is smaller
    "workflow once",
    "workflow unmeasured", // seen 20×, but no Δ was measured
    "avoid A", // largest Δ, but only from lost trajectories
  ]);
  assert.equal(bestSkillForFamily(library(), "cool"), "workflow of cool");
  assert.equal(bestSkillForFamily(library(), "clean"), null);
});

Deno.test("Δ shrinkage and the tie-breaks: times seen, then library order", () => {
  const lib = new SkillLibrary("job-1");
  see(lib, "first", { family: "f", won: true, gap: 0.2, n: 1 });
  see(lib, "seen more", { family: "f", won: true, gap: null, n: 3 });
  see(lib, "second", { family: "f", won: true, gap: 0.2, n: 1 });
  see(lib, "seen less", { family: "f", won: true, gap: null, n: 2 });
  assert.equal(shrunkTeacherGap(lib.get("first")!), 0.1);
  assert.deepEqual(
    rankSkillsForFamily(lib, "f").map((r) => r.text),
    ["first", "second", "seen more", "seen less"],
  );
  // Won sightings only count in their own family: "x" was won in g but lost in f.
  see(lib, "x", { family: "g", won: true, gap: 5 });
  see(lib, "x", { family: "f", won: false, gap: 5 });
  assert.equal(rankSkillsForFamily(lib, "f").at(-1)!.text, "x");
});

Deno.test("a chooser gives every task of a family the family's best skill, and survives a JSON round trip", () => {
  const choose = skillChooser(SkillLibrary.fromJSON(library().toJSON()));
  assert.equal(choose({ family: "heat" }), "workflow often");
  assert.equal(choose({ family: "cool" }), "workflow of cool");
  assert.equal(choose({ family: "clean" }), null);
  const old = library().toJSON();
  for (const s of old.skills) for (const p of s.provenance) delete p.family;
  assert.equal(skillChooser(SkillLibrary.fromJSON(old))({ family: "heat" }), null);
});
