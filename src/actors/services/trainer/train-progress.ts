/**
 * Edge validation of the trainer's progress messages (`akbe.<run>.svc.train.progress`, JSON
 * `{ step, done, total }`): they drive progress bars, so a forged one must not reach a bar with a
 * negative or absurd count.
 */
import { decodeAtEdge } from '../../../events/edge-gate.js';
import { int, object } from '../../../events/schema.js';

export interface TrainProgress {
  step: number;
  done: number;
  total: number;
}

const schema = object<TrainProgress>(
  { step: int({ min: 0 }), done: int({ min: 0 }), total: int({ min: 1, max: 1 << 20 }) },
  (p) => (p.done > p.total ? ['done', `must be <= total ${p.total} (got ${p.done})`] : null),
);

export function parseTrainProgress(bytes: Uint8Array): TrainProgress {
  return decodeAtEdge('svc.train.progress', () => {
    const value: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    schema.check(value, 'progress');
    return value as TrainProgress;
  });
}
