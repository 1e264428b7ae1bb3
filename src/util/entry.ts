import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * True when the module at `moduleUrl` is the script node was started with.
 *
 * npm runs bins through symlinks (`node_modules/.bin/akbe`, a global prefix's `bin/`, `npm link`)
 * and may start them through a shim, so argv[1] is rarely the module's own path: compare the two
 * real paths, with every link resolved, never the raw strings.
 */
export function isEntryPoint(moduleUrl: string, argv1: string | undefined = process.argv[1]): boolean {
  if (!argv1) return false;
  try {
    return realpathSync(argv1) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false; // argv[1] names no file (node -e, a REPL): not started as a script
  }
}
