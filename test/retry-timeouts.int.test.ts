/**
 * Issue 21 item 6: on a single server a call that timed out is made again, 250 ms apart doubling
 * to 4 s, at least TIMEOUT_ATTEMPTS times and then while the next try starts within
 * TIMEOUT_RETRY_MS of the first (src/events/retry.ts); any other error is final at once.
 */
import t from 'tap';
import {
  RetriesExhaustedError,
  type RetryClock,
  retryElection,
  TIMEOUT_ATTEMPTS,
  TIMEOUT_RETRY_MS,
  timeoutRetryMs,
} from '../src/events/retry.js';
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

/** A clock that moves only when slept on or advanced by hand. */
function handClock(): RetryClock & { advance(ms: number): void; slept: number[] } {
  let now = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => now,
    advance: (ms) => {
      now += ms;
    },
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  };
}

/** A call that always times out after `tryMs` on a hand clock: its calls, sleeps and error. */
async function alwaysTimingOut(tryMs: number, windowMs?: number) {
  const clock = handClock();
  let calls = 0;
  const err = await retryElection(
    nats.nc,
    'probe',
    async () => {
      calls++;
      clock.advance(tryMs);
      throw timeout();
    },
    { timeouts: { clock, ...(windowMs === undefined ? {} : { windowMs }) } },
  ).catch((e: Error) => e);
  return { calls, slept: clock.slept, err: err as Error };
}

t.test('always timing out, 10 s a try: tried for 90 s, then RetriesExhaustedError', async (t) => {
  // Worked by hand: tries start at 0, 10.25, 20.75, 31.75 (the 4 tries always made), then
  // 43.75, 57.75, 71.75 and 85.75 (each still inside 90 s); the 8th fails at 95.75 and
  // 95.75 + 4 > 90, so no 9th.
  const { calls, slept, err } = await alwaysTimingOut(10_000);
  t.equal(TIMEOUT_RETRY_MS, 90_000);
  t.equal(calls, 8);
  t.same(slept, [250, 500, 1000, 2000, 4000, 4000, 4000]);
  t.type(err, RetriesExhaustedError);
  t.equal(err.message, 'probe: no answer in 8 tries over 96 s (TimeoutError: timeout)');
  t.equal((err.cause as Error).name, 'TimeoutError');
});

t.test('a window already spent still makes TIMEOUT_ATTEMPTS tries', async (t) => {
  const { calls, err } = await alwaysTimingOut(60_000);
  t.equal(TIMEOUT_ATTEMPTS, 4);
  t.equal(calls, 4);
  t.equal(err.message, 'probe: no answer in 4 tries over 242 s (TimeoutError: timeout)');
});

t.test('AKBE_TIMEOUT_RETRY_MS sets the window; a bad value is refused in one line', async (t) => {
  t.equal(timeoutRetryMs({}), TIMEOUT_RETRY_MS);
  t.equal(timeoutRetryMs({ AKBE_TIMEOUT_RETRY_MS: '5000' }), 5000);
  t.throws(
    () => timeoutRetryMs({ AKBE_TIMEOUT_RETRY_MS: '200000' }),
    /expected whole milliseconds from 0 to 110000/,
  );
  t.throws(() => timeoutRetryMs({ AKBE_TIMEOUT_RETRY_MS: 'soon' }), /AKBE_TIMEOUT_RETRY_MS=soon/);
  // A 30 s window with 10 s tries: 0, 10.25, 20.75, 31.75 (the 4 always made), then 41.75 + 2 > 30.
  const { calls } = await alwaysTimingOut(10_000, 30_000);
  t.equal(calls, 4);
});

t.test('any other error is thrown at once', async (t) => {
  let calls = 0;
  const err = await retryElection(nats.nc, 'probe', async () => {
    calls++;
    throw new Error('stream not found');
  }).catch((e: Error) => e);
  t.equal(calls, 1);
  t.equal((err as Error).message, 'stream not found');
});
