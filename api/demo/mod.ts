/**
 * `deno task demo`: the whole product on one command, driven as a user would drive it — over
 * HTTP, through the client in `api/client/`. It imports no server file: the API and a worker run
 * as child processes (`processes.ts`), and the key is created with the key admin CLI
 * (`api/tools/keys.ts`) as a child process too.
 *
 * - `main.ts`: arguments, the run from start to summary, and stopping the children.
 * - `specs.ts`: the JobSpecs it submits (one per environment and method; the Sokoban one is
 *   `DEMO_PRESETS.sokoban` in `jobs/presets.ts`).
 * - `progress.ts`: follows the job's SSE stream and draws the progress line.
 * - `output_folder.ts`: takes the output folder when the run starts (`demo-output/`, or the next
 *   free `-2`, `-3`, …, atomically, so demos started together never share one) and moves the
 *   checked download into it without replacing anything; removes the unfinished download a
 *   killed run left (its lock no longer held).
 * - `summary.ts`: downloads the checkpoint archive and skill library and prints the summary with
 *   the curl commands of this run.
 *
 * README.md, "Quick start", says what to expect from a run.
 */
export { type DemoArgs, DemoJobFailedError, parseDemoArgs, runDemo } from "./main.ts";
export {
  DEMO_ENVS,
  DEMO_METHODS,
  DEMO_SPECS,
  type DemoEnv,
  type DemoMethod,
  demoSpec,
} from "./specs.ts";
