/**
 * Runs a machine to its output as a promise, with its facts delivered to a callback and an
 * AbortSignal that stops it. Test-only (moved out of src/machines, where nothing used it): a
 * test drives one machine this way without the orchestrator. No I/O here.
 */
import { type AnyStateMachine, createActor, type InputFrom, type OutputFrom } from 'xstate';
import type { AkbeFact } from '../../src/machines/facts.js';

export class MachineAbortedError extends Error {
  constructor(
    readonly machineId: string,
    opts?: ErrorOptions,
  ) {
    super(`${machineId}: aborted`, opts);
    this.name = 'MachineAbortedError';
  }
}

export function driveToOutput<TMachine extends AnyStateMachine>(
  machine: TMachine,
  input: InputFrom<TMachine>,
  opts: { signal?: AbortSignal; onFact?: (fact: AkbeFact) => void } = {},
): Promise<OutputFrom<TMachine>> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted)
      return reject(new MachineAbortedError(machine.id, { cause: opts.signal.reason }));
    const actor = createActor(machine, { input });
    if (opts.onFact) actor.on('*', (fact) => opts.onFact!(fact as AkbeFact));
    const onAbort = () => {
      // Reject first: stopping completes the actor's observers, which would resolve undefined.
      reject(new MachineAbortedError(machine.id, { cause: opts.signal?.reason }));
      actor.stop();
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    actor.subscribe({
      complete: () => {
        opts.signal?.removeEventListener('abort', onAbort);
        resolve((actor.getSnapshot() as { output?: unknown }).output as OutputFrom<TMachine>);
      },
      error: (err) => {
        opts.signal?.removeEventListener('abort', onAbort);
        reject(err);
      },
    });
    actor.start();
  });
}
