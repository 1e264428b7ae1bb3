/**
 * The home's data (checkpoints, worlds, NATS credentials, exports, keys) is the user's alone:
 * files 0600, directories 0700. Node's `mode` applies only to what a call creates, and the umask
 * applies after it, so every helper here also sets the mode explicitly.
 *
 * And the reverse: a secret read from a file (an API key) is refused unless the file is the
 * user's own and no one else may read or write it, as ssh refuses a world-readable key.
 */
import { chmodSync, mkdirSync, type Stats, writeFileSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** `mkdir -p` then 0700 on the leaf (parents created here get 0700 too, via `mode`). */
export async function mkdirPrivate(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  await chmod(dir, PRIVATE_DIR_MODE);
}

export function mkdirPrivateSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
}

export async function writePrivateFile(path: string, data: string | Uint8Array): Promise<void> {
  await writeFile(path, data, { mode: PRIVATE_FILE_MODE });
  await chmod(path, PRIVATE_FILE_MODE);
}

export function writePrivateFileSync(path: string, data: string | Uint8Array): void {
  writeFileSync(path, data, { mode: PRIVATE_FILE_MODE });
  chmodSync(path, PRIVATE_FILE_MODE);
}

export class SecretFileError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.name = 'SecretFileError';
  }
}

/** Why `path` may not hold a secret, or null: not a regular file, not ours, group/other bits set. */
export function secretFileProblem(path: string, st: Stats): string | null {
  if (!st.isFile()) return `${path} is not a regular file`;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return `${path} belongs to uid ${st.uid}, not to you (uid ${uid})`;
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0)
    return `${path} has mode ${mode.toString(8).padStart(4, '0')}: others may read it; chmod 600 ${path}`;
  return null;
}

/** The secret in `path` (trimmed), refused unless the file is the user's own and mode 0600 or stricter. */
export async function readSecretFile(path: string): Promise<string> {
  let st: Stats;
  try {
    st = await stat(path);
  } catch (err) {
    throw new SecretFileError(`cannot read ${path}: ${(err as Error).message}`, path);
  }
  const problem = secretFileProblem(path, st);
  if (problem) throw new SecretFileError(problem, path);
  const text = (await readFile(path, 'utf8')).trim();
  if (text === '') throw new SecretFileError(`${path} is empty`, path);
  return text;
}
