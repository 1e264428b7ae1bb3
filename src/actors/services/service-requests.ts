/**
 * Edge validation of the msgpack service requests: `svc.generate` (policy service) and `svc.train`
 * (trainer service). Each parser decodes the bytes and checks every field the handler reads, typed
 * and bounded; it throws EdgeRejectedError naming the field (`request.stopTokens must be an array
 * (got string)`), which the service answers (or dead-letters when there is no reply subject).
 */
import { decodeAtEdge, EdgeRejectedError } from '../../events/edge-gate.js';
import {
  array,
  float32Array,
  int,
  int32Array,
  number,
  object,
  optional,
  record,
  type Schema,
  SchemaViolation,
  string,
  uint32,
} from '../../events/schema.js';
import type { DpoPair, TrainBatch } from '../../rl/batch.js';
import { unpack } from '../nats/wire.js';
import type { GenerateCall } from './policy/protocol.js';
import type { TrainCall } from './trainer/protocol.js';

const MAX_TOKENS = 1 << 16;

function decode<T>(what: string, bytes: Uint8Array, schema: Schema<T>): T {
  return decodeAtEdge(what, () => {
    let value: unknown;
    try {
      value = unpack(bytes);
    } catch (err) {
      throw new EdgeRejectedError('undecodable', `${what}: not msgpack: ${(err as Error).message}`);
    }
    schema.check(value, 'request');
    return value as T;
  });
}

/** `vocabSize` and `context` are the served policy's (token ids and lengths are checked against them). */
export function parseGenerateCall(
  bytes: Uint8Array,
  policy: { vocabSize?: number; context: number },
): GenerateCall {
  const id = int({ min: 0, max: (policy.vocabSize ?? 2 ** 31) - 1 });
  const schema = object<GenerateCall>(
    {
      policyVersion: int({ min: 0 }),
      prompt: array(id, { min: 1 }),
      maxNewTokens: int({ min: 1, max: MAX_TOKENS }),
      seed: uint32(),
      temperature: number({ min: 0, max: 100 }),
      topP: number({ min: 0, max: 1 }),
      stopTokens: array(id),
      stopStrings: optional(array(string({ nonEmpty: true }))),
    },
    (r) => {
      if (r.topP <= 0) return ['topP', `must be > 0 (got ${r.topP})`];
      if (r.prompt.length > policy.context)
        return [
          'prompt',
          `has ${r.prompt.length} tokens, more than the policy's context of ${policy.context}`,
        ];
      return null;
    },
  );
  return decode('svc.generate', bytes, schema);
}

const batchRow = object<TrainBatch['rowInfo'][number]>({
  questionId: string(),
  rolloutId: string(),
  path: string({ pattern: /^(with-tool|no-tool)$/ }) as Schema<'with-tool' | 'no-tool'>,
  context: string({ pattern: /^(with-tool|no-tool)$/ }) as Schema<'with-tool' | 'no-tool'>,
  promptLength: int({ min: 0 }),
  length: int({ min: 1 }),
});

/** A batch's typed arrays must have the sizes its rows and T say, and mini-batches must name real rows. */
function checkBatchShape(b: TrainBatch): [string, string] | null {
  const { rows, T } = b;
  const sizes: Array<[keyof TrainBatch, number]> = [
    ['inputIds', rows * T],
    ['lossMask', rows * (T - 1)],
    ['oldLogprobs', rows * (T - 1)],
    ['advantages', rows],
    ['pgWeight', rows],
    ['akbeWeight', rows],
    ['recomputeOld', rows],
    ['proxLogprobs', rows * (T - 1)],
    ['refLogp', rows],
  ];
  for (const [k, n] of sizes) {
    if (b[k] === undefined) continue; // optional arrays (proxLogprobs)
    const len = (b[k] as ArrayLike<number>).length;
    if (len !== n) return [`batch.${k}`, `has ${len} values, the batch's ${rows} rows x T ${T} need ${n}`];
  }
  if (b.rowInfo.length !== rows)
    return ['batch.rowInfo', `has ${b.rowInfo.length} rows, batch.rows is ${rows}`];
  for (const [i, mb] of b.miniBatches.entries())
    for (const r of mb)
      if (r >= rows) return [`batch.miniBatches[${i}]`, `names row ${r}, the batch has ${rows}`];
  for (const [i, p] of (b.dpoPairs ?? []).entries())
    if (p.chosen >= rows || p.rejected >= rows || p.chosen === p.rejected)
      return [
        `batch.dpoPairs[${i}]`,
        `names rows ${p.chosen} and ${p.rejected}, the batch has ${rows} (distinct rows needed)`,
      ];
  for (const [i, r] of b.rowInfo.entries())
    if (r.length > T || r.promptLength >= r.length)
      return [`batch.rowInfo[${i}]`, `length ${r.length} / prompt ${r.promptLength} do not fit T ${T}`];
  return null;
}

const u8 = (): Schema<Uint8Array> => ({
  optional: false,
  check: (v, p) => {
    if (!(v instanceof Uint8Array)) throw new SchemaViolation(p, 'must be a Uint8Array');
  },
});

/** `vocabSize` is the trained policy's: every input id must be a token of it. */
export function parseTrainCall(
  bytes: Uint8Array,
  policy: { vocabSize?: number; context: number },
): TrainCall {
  const batch = object<TrainBatch>(
    {
      rows: int({ min: 1, max: 1 << 16 }),
      T: int({ min: 2, max: policy.context }),
      inputIds: int32Array(),
      lossMask: float32Array(),
      oldLogprobs: float32Array(),
      advantages: float32Array(),
      pgWeight: float32Array(),
      akbeWeight: float32Array(),
      recomputeOld: u8(),
      proxLogprobs: optional(float32Array()),
      refLogp: optional(float32Array()),
      rowInfo: array(batchRow),
      miniBatches: array(array(int({ min: 0 })), { min: 1 }),
      lossTokens: int({ min: 0 }),
      dpoPairs: optional(
        array(
          object<DpoPair>({
            chosen: int({ min: 0 }),
            rejected: int({ min: 0 }),
            weight: number({ min: 0, max: 1 }),
          }),
        ),
      ),
    },
    (b) => {
      const shape = checkBatchShape(b);
      if (shape) return [shape[0].replace(/^batch\./, ''), shape[1]];
      const vocab = policy.vocabSize ?? 2 ** 31;
      const bad = b.inputIds.findIndex((x) => x < 0 || x >= vocab);
      return bad >= 0
        ? [`inputIds[${bad}]`, `must be a token id in [0, ${vocab}) (got ${b.inputIds[bad]})`]
        : null;
    },
  );
  const schema = object<TrainCall>(
    {
      step: int({ min: 0 }),
      policyVersion: int({ min: 0 }),
      batch,
      losses: array(object({ name: string({ nonEmpty: true }), options: record(number()) }), { min: 1 }),
      lr: number({ min: 0, max: 10 }),
      epochs: int({ min: 1, max: 1000 }),
      rowsPerUpdate: int({ min: 1, max: 1 << 16 }),
      padId: int({ min: 0 }),
      signature: optional(
        object({ signer: string({ nonEmpty: true }), signature: string({ nonEmpty: true }) }),
      ),
    },
    (r) => {
      const widest = Math.max(...r.batch.miniBatches.map((m) => m.length));
      return widest > r.rowsPerUpdate
        ? ['rowsPerUpdate', `is ${r.rowsPerUpdate}, a mini-batch has ${widest} rows`]
        : null;
    },
  );
  return decode('svc.train', bytes, schema);
}
