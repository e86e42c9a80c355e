/**
 * Internal: a random secret shared by every process of one user over one data folder (the
 * embedded database's password, the embedded object store's key). The file is mode 0600, so
 * other users of the machine cannot read it, and is created atomically by the first process
 * that needs it: written to a temporary file, then hard-linked into place (which fails when
 * another process won the race; its secret is then read).
 */

/** 64 hex digits (256 random bits). */
const SECRET_PATTERN = /^[0-9a-f]{64}$/;

function readSecret(path: string): string | undefined {
  try {
    const secret = Deno.readTextFileSync(path).trim();
    return SECRET_PATTERN.test(secret) ? secret : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The secret stored at `path`, created first when absent.
 * @throws when the file exists but does not hold 64 hex digits.
 */
export function readOrCreateSecret(path: string): string {
  const existing = readSecret(path);
  if (existing !== undefined) return existing;
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const fresh = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const tmp = `${path}.${Deno.pid}.${crypto.randomUUID()}`;
  Deno.writeTextFileSync(tmp, fresh, { mode: 0o600 });
  try {
    Deno.linkSync(tmp, path);
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
  } finally {
    Deno.removeSync(tmp);
  }
  const secret = readSecret(path);
  if (secret === undefined) {
    throw new Error(`Cannot read the secret in ${path} as it must hold 64 hex digits`);
  }
  return secret;
}
