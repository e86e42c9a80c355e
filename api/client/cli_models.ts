/**
 * `seed models …`: upload a Hugging Face model folder, list, show and delete uploaded models
 * (api/README.md, "Bring your own model").
 *
 *   models upload DIR [--name N] [--idempotency-key K] [--json]   prints the model id
 *   models list [--json]                                          newest first, a header row
 *   models get ID [--json]                                        architecture, size, files
 *   models delete ID                                              refused while a job uses it
 */
import type { CliIo } from "./cli_io.ts";
import { usageLines } from "./cli_commands.ts";
import type { ModelInfo, SeedClient } from "./client.ts";
import { table } from "./cli_format.ts";
import { folderTar, listModelFolder } from "./model_folder.ts";
import { formatBytes, PlainProgress, renderBar } from "./progress.ts";

/** Usage lines of the `models` commands, from the CLI's one table (cli_commands.ts). */
export const MODELS_USAGE: string = usageLines("models");

/** Options the `models` commands read. */
export interface ModelsOptions {
  name?: string;
  "idempotency-key"?: string;
  json?: boolean;
}

/**
 * Runs `models SUB [ARG]`; returns the exit code (0 ok, 2 usage).
 * @throws ApiError on an HTTP error answer; Error for a folder that cannot be read.
 */
export async function modelsCommand(
  client: SeedClient,
  args: { sub?: string; arg?: string; options: ModelsOptions },
  io: CliIo,
): Promise<number> {
  const { sub, arg, options } = args;
  if (sub === "list") {
    const models = await client.listModels();
    if (options.json) io.out(JSON.stringify(models, null, 2) + "\n");
    else if (models.length > 0) io.out(modelsTable(models));
    else io.err("no models\n");
    return 0;
  }
  if (!arg || !["upload", "get", "delete"].includes(sub ?? "")) {
    io.err(`Cannot run "models${sub ? ` ${sub}` : ""}" as it needs one of:\n${MODELS_USAGE}\n`);
    return 2;
  }
  if (sub === "upload") return await upload(client, arg, options, io);
  if (sub === "get") {
    const model = await client.getModel(arg);
    io.out(options.json ? JSON.stringify(model, null, 2) + "\n" : describe(model));
    return 0;
  }
  await client.deleteModel(arg);
  io.out(`${arg}\tdeleted\n`);
  return 0;
}

/**
 * `models list`'s table as `seed list` prints jobs: a header row, then one model a line (id, name
 * or `-`, architecture, parameters with thousands separators, size, created as
 * `YYYY-MM-DD HH:MM:SS` UTC).
 */
function modelsTable(models: ModelInfo[]): string {
  const rows = [["ID", "NAME", "ARCHITECTURE", "PARAMETERS", "SIZE", "CREATED (UTC)"]];
  for (const m of models) {
    rows.push([
      m.id,
      m.name ?? "-",
      m.architecture,
      m.parameter_count.toLocaleString("en-US"),
      formatBytes(m.bytes),
      m.created_at.slice(0, 19).replace("T", " "),
    ]);
  }
  return table(rows);
}

function describe(m: ModelInfo): string {
  const lines = [
    `model         ${m.id}`,
    `base          ${m.base}`,
    `name          ${m.name ?? "-"}`,
    `architecture  ${m.architecture}`,
    `parameters    ${m.parameter_count}`,
    `size          ${formatBytes(m.bytes)} (${m.bytes} bytes)`,
    `created       ${m.created_at}`,
    `files`,
    ...m.files.map((f) => `  ${f.sha256}  ${f.bytes}\t${f.name}`),
  ];
  return lines.join("\n") + "\n";
}

/**
 * Tars `dir` and streams it to `POST /v1/models` with a progress bar on stderr (redrawn in place
 * on a terminal; otherwise a line per file and per tenth of the bytes, and at least every 15 s),
 * then waits while the server checks the model.
 */
async function upload(
  client: SeedClient,
  dir: string,
  options: ModelsOptions,
  io: CliIo,
): Promise<number> {
  const folder = await listModelFolder(dir);
  if (folder.left.length > 0) io.err(`not sent: ${folder.left.join(", ")}\n`);
  if (folder.files.length === 0) {
    throw new Error(`Cannot upload ${dir} as it must hold the model's files: it has none to send`);
  }
  const startMs = Date.now();
  let sentBytes = 0;
  let file = folder.files[0].name;
  let phase: "uploading" | "checking" = "uploading";
  const plain = new PlainProgress();
  let shown = "";
  let shownAtMs = 0;
  const draw = (final = false) => {
    const nowMs = Date.now();
    const elapsedS = (nowMs - startMs) / 1000;
    const etaS = phase === "uploading" && sentBytes > 0 && elapsedS >= 1
      ? (folder.bytes - sentBytes) / (sentBytes / elapsedS)
      : undefined;
    const line = renderBar({
      status: phase,
      stage: phase === "uploading" ? file : undefined,
      step: sentBytes,
      totalSteps: folder.bytes,
      unit: "bytes",
      etaS,
    });
    if (!io.tty) {
      const tenth = Math.floor((10 * sentBytes) / Math.max(1, folder.bytes));
      const out = plain.next({ line, key: `${phase} ${file} ${tenth}`, stage: phase }, nowMs);
      if (out !== null) io.err(`${out}\n`);
      return;
    }
    if (line === shown || (!final && nowMs - shownAtMs < 200)) return;
    shown = line;
    shownAtMs = nowMs;
    io.err(`\r\x1b[2K${line}`);
  };
  const archive = folderTar(folder.files, (name, bytes) => {
    file = name;
    sentBytes += bytes;
    if (sentBytes >= folder.bytes) phase = "checking";
    draw(phase === "checking");
  });
  draw(true);
  const timer = setInterval(draw, 2000);
  let answer;
  try {
    answer = await client.uploadModel(archive, {
      name: options.name,
      idempotencyKey: options["idempotency-key"],
    });
  } finally {
    clearInterval(timer);
    if (io.tty) io.err("\n");
  }
  const { model, created } = answer;
  io.out(options.json ? JSON.stringify(model, null, 2) + "\n" : `${model.id}\n`);
  io.err(
    `${
      created ? "uploaded" : "already uploaded with this Idempotency-Key:"
    } model ${model.id} (${model.architecture}, ${model.parameter_count} parameters, ${model.files.length} files, ${
      formatBytes(model.bytes)
    }); use it as "model": {"base": "${model.base}"}\n`,
  );
  if (model.skipped_files?.length) {
    io.err(`the service skipped: ${model.skipped_files.join(", ")}\n`);
  }
  return 0;
}
