import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts a worker thread from a module that sits beside the caller.
 *
 * Under `tap` the sources run as TypeScript through a loader that worker threads inherit
 * (execArgv), while the built package runs plain `.js`: pick the sibling file that matches the
 * caller's own extension so one call site works in both.
 */
export function startWorker(callerUrl: string, basename: string, options?: WorkerOptions): Worker {
  const ext = callerUrl.endsWith('.ts') ? '.ts' : '.js';
  return new Worker(new URL(`./${basename}${ext}`, callerUrl), options);
}
