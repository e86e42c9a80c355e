/**
 * Headless Chromium for the browser tests: Debian's `chromium` (Playwright's own browser download
 * cannot reach its host here; README.md, Development), driven by `playwright-core` with its
 * `executablePath`. Like Postgres (postgres.ts), the harness installs the package when it is
 * missing and we are root.
 */
import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

/** Where Debian's package puts the browser (override with `CHROMIUM_PATH`). */
export function chromiumPath(): string {
  return Deno.env.get("CHROMIUM_PATH") ?? "/usr/bin/chromium";
}

async function run(cmd: string[]): Promise<void> {
  const out = await new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  if (!out.success) {
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    throw new Error(`Cannot run ${cmd.join(" ")}: ${text.trim().slice(-2000)}`);
  }
}

/**
 * Returns the browser's path, installing Debian's `chromium` first when it is missing and we are
 * root. @throws Error when it is missing and we are not root.
 */
export async function ensureChromium(): Promise<string> {
  const path = chromiumPath();
  if (existsSync(path)) return path;
  if (Deno.uid() !== 0) {
    throw new Error(
      `Cannot start the browser tests as ${path} was not found: install Debian's \`chromium\` package (or set CHROMIUM_PATH)`,
    );
  }
  console.error("harness: no Chromium found; installing Debian's chromium package…");
  await run(["apt-get", "update", "-qq"]);
  await run([
    "env",
    "DEBIAN_FRONTEND=noninteractive",
    "apt-get",
    "install",
    "-y",
    "-qq",
    "chromium",
  ]);
  if (!existsSync(path)) throw new Error(`Cannot find ${path} after installing chromium`);
  return path;
}

/** Launches headless Chromium (no sandbox: the tests run as root). */
export async function launchChromium(): Promise<Browser> {
  return await chromium.launch({
    executablePath: await ensureChromium(),
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
}

/**
 * A new 1280×900 page of `browser` signed in to the dashboard at `origin` with API key `key`, and
 * the page errors it collects from the start (`problems`, as `pageerror: …` lines).
 */
export async function signedInPage(
  browser: Browser,
  origin: string,
  key: string,
): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  await page.goto(`${origin}/`);
  await page.waitForSelector("#api-key");
  await page.fill("#api-key", key);
  await page.click("#sign-in");
  return { page, problems };
}
