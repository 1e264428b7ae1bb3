// Stryker's buildCommand (stryker.config.mjs): compiles the instrumented sandbox, then copies the
// tiny Hugging Face configs the gpu tests read (bench/configs) beside the compiled tests, where
// their `../../bench/configs` URLs point. Stryker runs the command without a shell, hence a script.
import { spawnSync } from 'node:child_process';
import { cpSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.stryker.json'], { stdio: 'inherit' });
if (r.status !== 0) process.exit(r.status ?? 1);
cpSync('bench/configs', '.stryker-build/bench/configs', { recursive: true });
