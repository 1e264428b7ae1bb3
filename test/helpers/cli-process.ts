/**
 * Starts `akbe <args>` as a child process running the TypeScript sources (the loader tap gives
 * this test process), so tests can SIGKILL a worker or an orchestrator for real.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

export interface CliProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export function startCli(args: string[], env: NodeJS.ProcessEnv = {}): CliProcess {
  return startScript('src/cli/main.ts', args, env);
}

/** Starts a TypeScript script (a path from the repository root) as a child process. */
export function startScript(script: string, args: string[] = [], env: NodeJS.ProcessEnv = {}): CliProcess {
  const loader = process.execArgv.filter(
    (a) => a.includes('@tapjs/typescript') || a.includes('tsx') || a.includes('ts-node'),
  );
  const child = spawn(process.execPath, [...loader, resolve(script), ...args], {
    env: { ...process.env, ...env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

export async function until(
  what: string,
  ok: () => Promise<boolean> | boolean,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
