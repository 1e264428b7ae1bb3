/**
 * A secret read from a file (an API key) is refused unless the file is the user's own and no one
 * else may read or write it, as ssh refuses a world-readable key.
 */
import type { Stats } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';

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
