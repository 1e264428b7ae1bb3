/**
 * The policy worker thread: owns a `PolicyRuntime` (ORT sessions for decoding, scoring and
 * training) so that `session.run`, which blocks its thread, never blocks the caller's event loop.
 * Started by `PolicyHost` through `startWorker`; see policy-protocol.ts for the messages.
 *
 * Generate requests are not awaited one by one: each goes into the runtime's batcher, so requests
 * that arrive while a batch decodes are decoded together in the next one.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { PolicyReady, PolicyReply, PolicyRequest, PolicyWorkerInit } from './policy-protocol.js';
import { transferablesOf } from './policy-protocol.js';
import { PolicyRuntime } from './policy-runtime.js';

const port = parentPort!;
const init = workerData as PolicyWorkerInit;

function errorOf(e: unknown) {
  const err = e instanceof Error ? e : new Error(String(e));
  return { name: err.name, message: err.message, stack: err.stack };
}

async function start(): Promise<PolicyRuntime> {
  const log: string[] = [];
  const opts = {
    device: init.device ?? 'cpu',
    intraOpThreads: init.intraOpThreads,
    vocabPieces: init.vocabPieces,
    maxBatch: init.maxBatch,
    windowMs: init.windowMs,
    trainer: init.trainer,
    log: (line: string) => log.push(line),
  };
  try {
    const runtime = init.checkpoint
      ? await PolicyRuntime.fromCheckpoint(init.checkpoint, opts)
      : await PolicyRuntime.create(init.config!, new Map(Object.entries(init.params ?? {})), opts);
    await runtime.prepare(); // the host reports the device that actually runs
    port.postMessage({ ready: true, device: runtime.device, log } satisfies PolicyReady);
    return runtime;
  } catch (e) {
    port.postMessage({ ready: false, error: errorOf(e) } satisfies PolicyReady);
    throw e;
  }
}

async function handle(runtime: PolicyRuntime, msg: PolicyRequest): Promise<unknown> {
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

const ready = start();
// The host got the error in the ready message; closing the port lets this thread end.
ready.catch(() => port.close());
port.on('message', async (msg: PolicyRequest | 'close') => {
  if (msg === 'close') {
    const runtime = await ready;
    await runtime.close();
    port.close();
    return;
  }
  let reply: PolicyReply;
  try {
    const value = await handle(await ready, msg);
    reply = { id: msg.id, ok: true, value };
    port.postMessage(reply, transferablesOf(value));
  } catch (e) {
    reply = { id: msg.id, ok: false, error: errorOf(e) };
    port.postMessage(reply);
  }
});
