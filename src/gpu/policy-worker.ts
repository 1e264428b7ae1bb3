/**
 * The policy worker thread: owns a `PolicyRuntime` (ORT sessions for decoding, scoring and
 * training) so that `session.run`, which blocks its thread, never blocks the caller's event loop.
 * Started by `PolicyHost` (util/worker-rpc.ts); see policy-protocol.ts for the messages.
 *
 * Generate requests are not awaited one by one: each goes into the runtime's continuous batcher,
 * which yields this thread's event loop between decode steps, so a request that arrives while a
 * batch decodes joins it at the next step.
 */
import { workerData } from 'node:worker_threads';
import { serveWorker } from '../util/worker-rpc.js';
import type { PolicyMethod, PolicyReady, PolicyWorkerInit } from './policy-protocol.js';
import { PolicyRuntime } from './policy-runtime.js';

const init = workerData as PolicyWorkerInit;

async function start(): Promise<{ runtime: PolicyRuntime; log: string[] }> {
  const log: string[] = [];
  const opts = {
    device: init.device ?? 'cpu',
    intraOpThreads: init.intraOpThreads,
    vocabPieces: init.vocabPieces,
    maxBatch: init.maxBatch,
    maxBatchTokens: init.maxBatchTokens,
    windowMs: init.windowMs,
    trainer: init.trainer,
    weights: init.weights,
    batchInvariant: init.batchInvariant,
    log: (line: string) => log.push(line),
  };
  const runtime = init.checkpoint
    ? await PolicyRuntime.fromCheckpoint(init.checkpoint, opts)
    : await PolicyRuntime.create(init.config!, new Map(Object.entries(init.params ?? {})), opts);
  await runtime.prepare(); // the host reports the device that actually runs
  return { runtime, log };
}

async function handle(runtime: PolicyRuntime, msg: PolicyMethod): Promise<unknown> {
  switch (msg.method) {
    case 'generate':
      return runtime.generate(msg.args[0]);
    case 'logprobs':
      return runtime.logprobs(msg.args[0]);
    case 'trainStep':
      return runtime.trainStep(msg.args[0]);
    case 'getParams':
      // Copies: the runtime keeps its own arrays, the copies' buffers are transferred.
      return Object.fromEntries([...runtime.getParams()].map(([k, v]) => [k, v.slice()]));
    case 'setParams':
      runtime.setParams(new Map(Object.entries(msg.args[0])));
      return undefined;
    case 'loadCheckpoint':
      await runtime.loadCheckpoint(msg.args[0]);
      return undefined;
    case 'holdVersion':
      await runtime.holdVersion(msg.args[0], msg.args[1]);
      return undefined;
    case 'loadVersion':
      await runtime.loadVersion(msg.args[0], msg.args[1], msg.args[2]);
      return undefined;
    case 'saveCheckpoint':
      await runtime.saveCheckpoint(msg.args[0]);
      return undefined;
    case 'info':
      return runtime.info();
    case 'sleep':
      // Test hook: keeps this thread busy, as a long decode would.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, msg.args[0]);
      return undefined;
    default: {
      const _: never = msg;
      throw new Error(`unknown policy method ${JSON.stringify(_)}`);
    }
  }
}

serveWorker<PolicyMethod, PolicyReady>(async () => {
  const { runtime, log } = await start();
  return {
    ready: { device: runtime.device, log },
    handle: (msg) => handle(runtime, msg),
    close: () => runtime.close(),
  };
});
