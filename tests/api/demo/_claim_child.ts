/**
 * A process that takes an output folder as a demo run does and then holds it until it is killed:
 * `deno run -A _claim_child.ts DIR` prints the folder it took on one line, then waits.
 */
import { claimOutputFolder } from "../../../api/demo/output_folder.ts";

const folder = await claimOutputFolder(Deno.args[0]);
console.log(folder.path);
setInterval(() => {}, 60_000); // keeps the process, and so the folder's lock, alive
