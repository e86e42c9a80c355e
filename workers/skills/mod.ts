/**
 * The skill machinery of SEED, one home for the trainer (workers/seed) and the server
 * (workers/serve): what a hindsight skill is, how the analyzer is asked for one and how its answer
 * is read, where a skill goes in a prompt, the library that keeps them and which one to give the
 * policy. See README.md beside this file.
 *
 * - `prompt.ts`: the analyzer prompt, the lenient parse of its answer (`_lenient_json.ts`), the
 *   analysis schema of constrained decoding, the skill block and its insertion into a turn's
 *   prompt (`insertSkill`, the re-scoring step's `teacherPrompts`) or into chat messages
 *   (`withSkill`);
 * - `generation.ts`: the analyzer's generation settings at RL time and the budget check;
 * - `library.ts`: the skill library with provenance (stored with each checkpoint; a step's skills
 *   go in with `recordSkills`);
 * - `choice.ts`: which library skill to give the policy, by family at evaluation and by words at
 *   inference.
 */
export * from "./prompt.ts";
export * from "./generation.ts";
export * from "./library.ts";
export * from "./choice.ts";
