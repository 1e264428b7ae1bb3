/**
 * Starts `akbe <args>` as a child process running the TypeScript sources (the loader tap gives
 * this test process), so tests can SIGKILL a worker or an orchestrator for real.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface CliProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

export function startCli(args: string[], env: NodeJS.ProcessEnv = {}): CliProcess {
  return startScript('src/cli/main.ts', args, env);
}

/**
 * The node flags that let this process run TypeScript (test/helpers/ts-register.mjs), for a
 * child. A relative --import (tap's node-arg) is made absolute so a child with another cwd finds it.
 */
export function tsLoaderArgs(): string[] {
  return process.execArgv
    .filter((a) => a.includes('ts-register') || a.includes('tsx') || a.includes('ts-node'))
    .map((a) => (a.startsWith('--import=./') ? `--import=${pathToFileURL(resolve(a.slice(9)))}` : a));
}

/** Starts a TypeScript script (a path from the repository root) as a child process. */
export function startScript(script: string, args: string[] = [], env: NodeJS.ProcessEnv = {}): CliProcess {
  const child = spawn(process.execPath, [...tsLoaderArgs(), resolve(script), ...args], {
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
