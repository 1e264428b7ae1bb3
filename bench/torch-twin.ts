/**
 * What the PyTorch-twin benches share (bench/train-memory.ts, bench/torch-speed.ts): which Python
 * to run and whether torch imports there, so every bench finds the same twin or says why not.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * The Python with torch: AKBE_PYTHON, else Debian's /usr/bin/python3 (where `apt-get install
 * python3-torch` puts it; a pyenv or venv `python3` earlier on PATH would not see it), else python3.
 */
export const PYTHON =
  process.env.AKBE_PYTHON || (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

/** Why no PyTorch twin can run here, or undefined when `PYTHON -c 'import torch'` works. */
export function torchMissing(): string | undefined {
  try {
    execFileSync(PYTHON, ['-c', 'import torch'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return `no PyTorch twin: \`${PYTHON} -c 'import torch'\` fails here (AKBE_PYTHON names another)`;
  }
}
