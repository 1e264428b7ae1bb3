/**
 * The edge validators (src/actors/services, src/events/edge-gate.ts): each bad message of issue 11's
 * findings is refused with an EdgeRejectedError whose reason and message name the field, and a
 * well-formed message passes unchanged.
 */
import t from 'tap';
import { pack } from '../src/actors/nats/wire.js';
import { parseRolloutCommand } from '../src/actors/rollout/rollout-command.js';
import { parseGenerateCall, parseTrainCall } from '../src/actors/services/service-requests.js';
import { parseTrainProgress } from '../src/actors/services/trainer/train-progress.js';
import { createEvent } from '../src/events/catalog.js';
import { decodeStoredEvent, encodeEvent } from '../src/events/codec.js';
import { EdgeRejectedError } from '../src/events/edge-gate.js';
import { InvalidEventError } from '../src/events/errors.js';
import { rolloutInputs } from '../src/machines/question.js';
import { assembleBatch } from '../src/rl/batch.js';
import { group } from './helpers/rollouts.js';

const refused = (fn: () => unknown, reason: string, message: RegExp) => {
  try {
    fn();
  } catch (err) {
    return err instanceof EdgeRejectedError && err.reason === reason && message.test(err.message)
      ? true
      : `${(err as Error).name} ${(err as EdgeRejectedError).reason}: ${(err as Error).message}`;
  }
  return 'accepted';
};

const input = rolloutInputs({
  step: 1,
  question: { id: 'q7', text: 'q?', gold: ['a'], split: 'train', withToolPrompt: [1, 2], noToolPrompt: [3] },
  policyVersion: 1,
  runSeed: 5,
  gWithTool: 1,
  gNoTool: 1,
  limits: { maxToolCalls: 2, maxResponseTokens: 40 },
  sampling: { temperature: 1, topP: 1 },
} as Parameters<typeof rolloutInputs>[0])[0];

t.test('rollout commands', async (t) => {
  const good = { runId: 'r1', input };
  t.same(parseRolloutCommand(pack(good), 'r1', { vocabSize: 10 }), good, 'a real command passes');
  t.equal(
    refused(
      () => parseRolloutCommand(pack({ runId: 'r1', step: 0, input: { rolloutId: 'evil' } }), 'r1'),
      'invalid',
      /command\.input\.questionId is required/,
    ),
    true,
    "issue 11's evil command is refused naming the field",
  );
  t.equal(
    refused(() => parseRolloutCommand(new Uint8Array([0x92, 0x01]), 'r1'), 'undecodable', /not msgpack/),
    true,
  );
  t.equal(
    refused(() => parseRolloutCommand(pack(good), 'r2'), 'invalid', /runId must be this worker's run r2/),
    true,
  );
  t.equal(
    refused(
      () => parseRolloutCommand(pack({ ...good, input: { ...input, step: 2 } }), 'r1'),
      'invalid',
      /rolloutId must be "s2\.q7\.wt0"/,
    ),
    true,
    'a rollout id that does not match its step is refused',
  );
  t.equal(
    refused(
      () => parseRolloutCommand(pack(good), 'r1', { vocabSize: 2 }),
      'invalid',
      /promptTokens\[1\] must be <= 1/,
    ),
    true,
    'token ids outside the vocabulary are refused',
  );
  const nanSeed = { ...good, input: { ...input, seed: Number.NaN } };
  t.equal(
    refused(() => parseRolloutCommand(pack(nanSeed), 'r1'), 'invalid', /seed must be an integer \(got NaN\)/),
    true,
  );
});

t.test('svc.generate requests', async (t) => {
  const policy = { vocabSize: 50, context: 16 };
  const good = {
    policyVersion: 0,
    prompt: [1, 2],
    maxNewTokens: 4,
    seed: 3,
    temperature: 1,
    topP: 0.9,
    stopTokens: [7],
  };
  t.same(parseGenerateCall(pack(good), policy), good);
  t.equal(
    refused(
      () => parseGenerateCall(pack({ ...good, stopTokens: 'x' }), policy),
      'invalid',
      /request\.stopTokens must be an array \(got string\)/,
    ),
    true,
    "stopTokens: 'x' is refused",
  );
  t.equal(
    refused(
      () => parseGenerateCall(pack({ ...good, prompt: new Array(17).fill(1) }), policy),
      'invalid',
      /context of 16/,
    ),
    true,
  );
  t.equal(
    refused(() => parseGenerateCall(pack({ ...good, topP: 0 }), policy), 'invalid', /topP must be > 0/),
    true,
  );
  t.equal(
    refused(
      () => parseGenerateCall(pack({ ...good, extra: 1 }), policy),
      'invalid',
      /extra is not a known field/,
    ),
    true,
  );
  t.equal(
    refused(() => parseGenerateCall(pack([1, 2]), policy), 'invalid', /must be an object \(got array\)/),
    true,
  );
});

t.test('svc.train requests', async (t) => {
  const batch = assembleBatch([{ group: group('q1', [1, 0], [1]), label: null, advantages: [0.7, -0.7] }], {
    rowKinds: [],
    miniBatchQuestions: 1,
    padTo: 8,
  });
  const policy = { vocabSize: 1000, context: 8 };
  const good = {
    step: 0,
    policyVersion: 0,
    batch,
    losses: [{ name: 'grpo', options: { clipEps: 0.2 } }],
    lr: 1e-3,
    epochs: 1,
    rowsPerUpdate: 3,
    padId: 0,
  };
  t.equal(
    parseTrainCall(pack(good), policy).batch.inputIds.length,
    batch.inputIds.length,
    'a real batch passes',
  );
  t.equal(
    refused(
      () => parseTrainCall(pack({ ...good, lr: Number.NaN }), policy),
      'invalid',
      /request\.lr must be a finite number \(got NaN\)/,
    ),
    true,
    'lr NaN is named NaN',
  );
  const short = { ...batch, lossMask: batch.lossMask.subarray(1) };
  t.equal(
    refused(
      () => parseTrainCall(pack({ ...good, batch: short }), policy),
      'invalid',
      /batch\.lossMask has 13 values/,
    ),
    true,
    'arrays that do not fit rows x T are refused',
  );
  const prox = new Float32Array(batch.lossMask.length).fill(-1);
  t.same(
    parseTrainCall(pack({ ...good, batch: { ...batch, proxLogprobs: prox } }), policy).batch.proxLogprobs,
    prox,
    'proximal logprobs of the right size pass',
  );
  t.equal(
    refused(
      () => parseTrainCall(pack({ ...good, batch: { ...batch, proxLogprobs: prox.subarray(2) } }), policy),
      'invalid',
      /batch\.proxLogprobs has 12 values/,
    ),
    true,
    'proximal logprobs that do not fit rows x T are refused',
  );
  const pairs = { ...batch, dpoPairs: [{ chosen: 0, rejected: 1, weight: 1 }], refLogp: new Float32Array(2) };
  t.same(
    parseTrainCall(pack({ ...good, batch: pairs }), policy).batch.dpoPairs,
    pairs.dpoPairs,
    'DPO pairs pass',
  );
  for (const [bad, why] of [
    [{ ...pairs, dpoPairs: [{ chosen: 0, rejected: 5, weight: 1 }] }, /dpoPairs\[0\] names rows 0 and 5/],
    [{ ...pairs, dpoPairs: [{ chosen: 1, rejected: 1, weight: 1 }] }, /distinct rows needed/],
    [{ ...pairs, dpoPairs: [{ chosen: 0, rejected: 1, weight: 2 }] }, /weight must be <= 1/],
    [{ ...pairs, refLogp: new Float32Array(3) }, /batch\.refLogp has 3 values/],
  ] as const)
    t.equal(
      refused(() => parseTrainCall(pack({ ...good, batch: bad }), policy), 'invalid', why),
      true,
      `${why}`,
    );
  const wide = { ...batch, miniBatches: [[0, 1, 9]] };
  t.equal(
    refused(() => parseTrainCall(pack({ ...good, batch: wide }), policy), 'invalid', /names row 9/),
    true,
  );
  t.equal(
    refused(
      () => parseTrainCall(pack({ ...good, rowsPerUpdate: 1 }), policy),
      'invalid',
      /a mini-batch has 2 rows/,
    ),
    true,
  );
  t.equal(
    refused(
      () => parseTrainCall(pack({ ...good, batch: { ...batch, T: 9 } }), policy),
      'invalid',
      /T must be <= 8/,
    ),
    true,
  );
});

t.test('train progress and stored events', async (t) => {
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  t.same(parseTrainProgress(enc({ step: 1, done: 2, total: 4 })), { step: 1, done: 2, total: 4 });
  t.equal(
    refused(
      () => parseTrainProgress(enc({ step: 1, done: 5, total: 4 })),
      'invalid',
      /done must be <= total 4/,
    ),
    true,
  );
  t.equal(
    refused(() => parseTrainProgress(new Uint8Array([0xff])), 'undecodable', /svc\.train\.progress/),
    true,
  );
  const e = createEvent(
    'run.finished',
    { status: 'completed', stepsCompleted: 1, elapsedSeconds: 1 },
    { runId: 'r1', step: 0, policyVersion: 1 },
  );
  t.equal(decodeStoredEvent('akbe.r1.evt.run.finished', encodeEvent(e)).type, 'run.finished');
  t.throws(
    () => decodeStoredEvent('akbe.r1.evt.rollout.completed', encodeEvent(e)),
    InvalidEventError,
    'a misrouted event is refused',
  );
  t.throws(
    () => decodeStoredEvent('akbe.r2.evt.run.finished', encodeEvent(e)),
    /must be akbe\.r1\.evt\.run\.finished/,
  );
});
