/**
 * svc.generate's reply is validated where the caller receives it (requestGenerate): a fake policy
 * responder on a real nats-server answers replies that break the request's contract, and each is a
 * ServiceCallError 'InvalidReply' naming the field; a good reply passes. checkGenerateReply itself is
 * checked without a server for the cases the wire cannot carry (NaN, a non-object).
 */
import type { Msg } from '@nats-io/transport-node';
import t, { type Test } from 'tap';
import { answer, ServiceCallError } from '../src/actors/nats/wire.js';
import { requestGenerate } from '../src/actors/services/policy/policy-service.js';
import {
  checkGenerateReply,
  type GenerateCall,
  type GenerateReply,
  InvalidGenerateReplyError,
} from '../src/actors/services/policy/protocol.js';
import { serviceSubject } from '../src/events/subjects.js';
import { withNats } from './helpers/nats.js';

const nats = await withNats(t);
const nc = nats.nc;

const REQ: GenerateCall = {
  policyVersion: 3,
  prompt: [1, 2, 3],
  maxNewTokens: 4,
  seed: 7,
  temperature: 1,
  topP: 1,
  stopTokens: [0],
};
const GOOD: GenerateReply = {
  tokens: [5, 6, 0],
  logprobs: [-0.5, -1.25, -0.1],
  finish: 'stop_token',
  version: 3,
};

let run = 0;
/** A fake policy service on a fresh run's svc.generate that answers every request with `reply`. */
function fakePolicy(t: Test, reply: unknown): string {
  const runId = `reply${++run}`;
  const sub = nc.subscribe(serviceSubject(runId, 'generate'), {
    callback: (_err, m: Msg) => void answer(m, async () => reply),
  });
  t.teardown(() => sub.unsubscribe());
  return runId;
}

const failure = (p: Promise<unknown>): Promise<ServiceCallError> =>
  p.then(
    () => {
      throw new Error('the call resolved');
    },
    (e: ServiceCallError) => e,
  );

t.test('a good reply passes, each finish reason included', async (t) => {
  for (const finish of ['stop_token', 'stop_string', 'length'] as const) {
    const runId = fakePolicy(t, { ...GOOD, finish });
    t.same(await requestGenerate(nc, runId, REQ, 5000), { ...GOOD, finish }, finish);
  }
  const empty = fakePolicy(t, { tokens: [], logprobs: [], finish: 'length', version: 3 });
  t.same((await requestGenerate(nc, empty, REQ, 5000)).tokens, [], 'no tokens (no room left) is a reply');
  const full = fakePolicy(t, { ...GOOD, tokens: [5, 6, 7, 8], logprobs: [-1, -1, -1, -1], finish: 'length' });
  t.equal((await requestGenerate(nc, full, REQ, 5000)).tokens.length, 4, 'exactly maxNewTokens');
});

const BAD: Array<[string, unknown, string, RegExp]> = [
  ['a token that is a float', { ...GOOD, tokens: [5, 6.5, 0] }, 'tokens', /tokens\[1\] is 6\.5/],
  ['logprobs shorter than tokens', { ...GOOD, logprobs: [-0.5, -1] }, 'logprobs', /2 logprobs for 3 tokens/],
  ["finish 'eos' (the old vocabulary)", { ...GOOD, finish: 'eos' }, 'finish', /"eos", not one of stop_token/],
  ['a wrong version', { ...GOOD, version: 2 }, 'version', /is 2, but the request named policy version 3/],
  [
    'more tokens than maxNewTokens',
    { ...GOOD, tokens: [5, 6, 7, 8, 0], logprobs: [-1, -1, -1, -1, -1] },
    'tokens',
    /5 tokens, more than the maxNewTokens 4/,
  ],
  ['a negative token id', { ...GOOD, tokens: [5, -1, 0] }, 'tokens', /tokens\[1\] is -1/],
  ['a logprob that is a string', { ...GOOD, logprobs: [-0.5, '-1', -0.1] }, 'logprobs', /logprobs\[1\]/],
  ['tokens missing', { logprobs: [], finish: 'length', version: 3 }, 'tokens', /not an array/],
  ['no version', { tokens: [], logprobs: [], finish: 'length' }, 'version', /undefined/],
  ['a reply that is no object', [1, 2], 'reply', /not an object/],
];

for (const [what, reply, field, message] of BAD) {
  t.test(`${what}: rejected as InvalidReply naming ${field}`, async (t) => {
    const runId = fakePolicy(t, reply);
    const err = await failure(requestGenerate(nc, runId, REQ, 5000));
    t.ok(err instanceof ServiceCallError, err.message);
    t.equal(err.subject, serviceSubject(runId, 'generate'));
    t.equal(err.remoteName, 'InvalidReply');
    t.match(err.message, new RegExp(`: InvalidReply: ${field}: `));
    t.match(err.message, message);
    t.ok(err.cause instanceof InvalidGenerateReplyError);
    t.equal((err.cause as InvalidGenerateReplyError).field, field);
  });
}

t.test('checkGenerateReply: non-finite logprobs and a non-object, without the wire', async (t) => {
  t.doesNotThrow(() => checkGenerateReply(GOOD, REQ));
  for (const x of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
    t.throws(() => checkGenerateReply({ ...GOOD, logprobs: [-0.5, x, -0.1] }, REQ), {
      name: 'InvalidGenerateReplyError',
      field: 'logprobs',
    });
  for (const x of [null, undefined, 'text', 3])
    t.throws(() => checkGenerateReply(x, REQ), { name: 'InvalidGenerateReplyError', field: 'reply' });
  t.throws(() => checkGenerateReply({ ...GOOD, finish: 'stop' }, REQ), {
    name: 'InvalidGenerateReplyError',
    field: 'finish',
  });
  t.throws(() => checkGenerateReply({ ...GOOD, tokens: [5, 2 ** 60, 0] }, REQ), {
    name: 'InvalidGenerateReplyError',
    field: 'tokens',
  });
});
