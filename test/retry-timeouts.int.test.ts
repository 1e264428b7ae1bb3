/**
 * Issue 21 item 6: on a single server a call that timed out is made again, TIMEOUT_ATTEMPTS times
 * in all, 250/500/1000 ms apart (src/events/retry.ts); any other error is final at once.
 */
import t from 'tap';
import { RetriesExhaustedError, retryElection, TIMEOUT_ATTEMPTS } from '../src/events/retry.js';
import { withNats } from './helpers/nats.js';

const nats = await withNats(t);
const timeout = () => Object.assign(new Error('timeout'), { name: 'TimeoutError' });

t.test('a call that timed out twice is made a third time and its answer returned', async (t) => {
  let calls = 0;
  const t0 = Date.now();
  const r = await retryElection(nats.nc, 'probe', async () => {
    if (++calls <= 2) throw timeout();
    return 'ok';
  });
  t.equal(r, 'ok');
  t.equal(calls, 3);
  t.ok(Date.now() - t0 >= 700, 'waited 250 + 500 ms between the tries');
});

t.test(
  'always timing out: RetriesExhaustedError after TIMEOUT_ATTEMPTS tries, the timeout its cause',
  async (t) => {
    let calls = 0;
    const err = await retryElection(nats.nc, 'probe', async () => {
      calls++;
      throw timeout();
    }).catch((e: Error) => e);
    t.equal(TIMEOUT_ATTEMPTS, 4);
    t.equal(calls, 4);
    t.type(err, RetriesExhaustedError);
    t.equal((err as Error).message, 'probe: no answer in 4 tries (TimeoutError: timeout)');
    t.equal(((err as Error).cause as Error).name, 'TimeoutError');
  },
);

t.test('any other error is thrown at once', async (t) => {
  let calls = 0;
  const err = await retryElection(nats.nc, 'probe', async () => {
    calls++;
    throw new Error('stream not found');
  }).catch((e: Error) => e);
  t.equal(calls, 1);
  t.equal((err as Error).message, 'stream not found');
});
