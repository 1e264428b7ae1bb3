/**
 * The service envelope (src/actors/nats/wire.ts) on a real nats-server: values (typed arrays kept)
 * and every error path a caller can meet — a handler error, a refusal at the edge, no responder,
 * a timeout, an undecodable reply — come back as a ServiceCallError naming the subject and the
 * remote error; a reply to a requester that is gone never throws.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Msg } from '@nats-io/transport-node';
import t, { type Test } from 'tap';
import { connectLocal } from '../src/actors/nats/connection.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import { answer, call, pack, respondError, ServiceCallError } from '../src/actors/nats/wire.js';
import { withNats } from './helpers/nats.js';

const nats = await withNats(t);
const nc = nats.nc;

/** Serves `subject` with `onMsg` until the test ends. */
function serve(t: Test, subject: string, onMsg: (m: Msg) => void | Promise<void>) {
  const sub = nc.subscribe(subject, { callback: (_err, m) => void onMsg(m) });
  t.teardown(() => sub.unsubscribe());
}

/** The error a call rejects with (a call that resolves fails the test). */
const failure = (p: Promise<unknown>): Promise<ServiceCallError> =>
  p.then(
    () => {
      throw new Error('the call resolved');
    },
    (e: ServiceCallError) => e,
  );

t.test('an ok reply carries the value, typed arrays included', async (t) => {
  serve(t, 'akbe.test.wire.ok', (m) =>
    answer(m, async () => ({ got: m.data.length > 0, logprobs: Float32Array.from([-0.5, -2]) })),
  );
  const v = await call<{ got: boolean; logprobs: Float32Array }>(nc, 'akbe.test.wire.ok', { x: 1 }, 5000);
  t.equal(v.got, true);
  t.ok(v.logprobs instanceof Float32Array, 'a Float32Array, not a plain array');
  t.same(Array.from(v.logprobs), [-0.5, -2]);
});

t.test("a handler's error is answered and re-thrown by the caller with its name", async (t) => {
  serve(t, 'akbe.test.wire.fail', (m) =>
    answer(m, async () => {
      throw new RangeError('topk must be >= 1');
    }),
  );
  const err = await failure(call(nc, 'akbe.test.wire.fail', {}, 5000));
  t.ok(err instanceof ServiceCallError);
  t.equal(err.subject, 'akbe.test.wire.fail');
  t.equal(err.remoteName, 'RangeError');
  t.equal(err.message, 'akbe.test.wire.fail: RangeError: topk must be >= 1');
});

t.test('a thrown non-Error is answered as an Error with its text', async (t) => {
  serve(t, 'akbe.test.wire.string', (m) =>
    answer(m, async () => {
      throw 'plain string';
    }),
  );
  await t.rejects(call(nc, 'akbe.test.wire.string', {}, 5000), {
    name: 'ServiceCallError',
    remoteName: 'Error',
    message: 'akbe.test.wire.string: Error: plain string',
  });
});

t.test('respondError refuses a request at the edge; without a reply subject it throws', async (t) => {
  const refused = new Promise<void>((resolve) =>
    serve(t, 'akbe.test.wire.edge', (m) => {
      if (m.reply) respondError(m, Object.assign(new Error('bad field x'), { name: 'InvalidRequest' }));
      else {
        t.throws(() => respondError(m, new Error('x')), { message: 'no reply subject' });
        resolve();
      }
    }),
  );
  await t.rejects(call(nc, 'akbe.test.wire.edge', {}, 5000), {
    remoteName: 'InvalidRequest',
    message: 'akbe.test.wire.edge: InvalidRequest: bad field x',
  });
  nc.publish('akbe.test.wire.edge', pack({}));
  await refused;
});

t.test('answer to a message without a reply subject does not throw', async (t) => {
  const done = new Promise<unknown>((resolve) =>
    serve(t, 'akbe.test.wire.noreply', async (m) => {
      resolve(
        await answer(m, async () => 1).then(
          () => 'answered',
          (err: unknown) => err,
        ),
      );
    }),
  );
  nc.publish('akbe.test.wire.noreply', pack({}));
  t.equal(await done, 'answered', 'answer() resolved without a requester');
});

t.test('no responder, a timeout and an undecodable reply are ServiceCallErrors', async (t) => {
  const none = await failure(call(nc, 'akbe.test.wire.nobody', {}, 2000));
  t.ok(none instanceof ServiceCallError);
  t.equal(none.subject, 'akbe.test.wire.nobody');
  t.match(none.message, /no responders/, `no responder: ${none.message}`);

  serve(t, 'akbe.test.wire.silent', () => {});
  const slow = await failure(call(nc, 'akbe.test.wire.silent', {}, 300));
  t.ok(slow instanceof ServiceCallError);
  t.match(slow.remoteName, /Timeout/i, `timeout: ${slow.message}`);

  // A truncated msgpack map, and well-formed msgpack that is not a reply envelope.
  serve(t, 'akbe.test.wire.garbage', (m) => {
    m.respond(Uint8Array.from([0x82, 0xa2]));
  });
  await t.rejects(call(nc, 'akbe.test.wire.garbage', {}, 5000), {
    name: 'ServiceCallError',
    remoteName: 'UndecodableReply',
  });
  for (const [i, body] of [42, null, { ok: false }, { ok: 'yes', value: 1 }].entries()) {
    serve(t, `akbe.test.wire.odd${i}`, (m) => {
      m.respond(pack(body));
    });
    await t.rejects(
      call(nc, `akbe.test.wire.odd${i}`, {}, 5000),
      { name: 'ServiceCallError', remoteName: 'UndecodableReply' },
      `reply ${JSON.stringify(body)}`,
    );
  }
});

t.test('a request lost with its server is sent again after the reconnect, and answered', async (t) => {
  // The first copy is dropped, as a server that died with it would; the copy re-sent after the
  // caller's reconnect is answered long before the call's 20 s timeout.
  let seen = 0;
  serve(t, 'akbe.test.wire.lost', (m) => {
    seen++;
    if (seen > 1) void answer(m, async () => ({ copy: seen }));
  });
  const caller = await nats.connectAs('orchestrator');
  const started = Date.now();
  const reply = call<{ copy: number }>(caller, 'akbe.test.wire.lost', {}, 20_000);
  while (seen === 0) await new Promise((r) => setTimeout(r, 10));
  await caller.reconnect();
  t.same(await reply, { copy: 2 }, 'the second copy answered');
  t.ok(Date.now() - started < 10_000, `answered in ${Date.now() - started} ms, not at the timeout`);
});

t.test('a closed connection fails a pending call at once', async (t) => {
  serve(t, 'akbe.test.wire.never', () => {});
  const caller = await nats.connectAs('orchestrator');
  const started = Date.now();
  const pending = failure(call(caller, 'akbe.test.wire.never', {}, 60_000));
  await new Promise((r) => setTimeout(r, 50));
  await caller.close();
  const err = await pending;
  t.equal(err.remoteName, 'ClosedConnectionError', err.message);
  t.ok(Date.now() - started < 5_000, `failed in ${Date.now() - started} ms, not at the 60 s timeout`);
});

t.test('waitForResponderMs: a single server asks again for a service that starts late', async (t) => {
  const started = Date.now();
  const late = setTimeout(
    () =>
      serve(t, 'akbe.test.wire.late', (m) => {
        void answer(m, async () => 'up');
      }),
    700,
  );
  t.teardown(() => clearTimeout(late));
  t.equal(await call<string>(nc, 'akbe.test.wire.late', {}, 10_000, { waitForResponderMs: 5_000 }), 'up');
  t.ok(Date.now() - started >= 700, 'answered by the service that subscribed 0.7 s later');
  // Without a responder the wait ends at its bound, not at the (longer) request timeout.
  const t0 = Date.now();
  const none = await failure(call(nc, 'akbe.test.wire.never', {}, 20_000, { waitForResponderMs: 1_000 }));
  t.match(none.message, /no responders/);
  t.ok(Date.now() - t0 < 5_000, `gave up after ${Date.now() - t0} ms`);
});

t.test(
  'waiting for a responder: a shorter reply timeout does not cut it; an abort ends it at once',
  async (t) => {
    // Nobody received the request while no responder was there: the 500 ms reply timeout counts
    // from the publish that reached the late service, not from the first.
    const late = setTimeout(
      () =>
        serve(t, 'akbe.test.wire.later2', (m) => {
          void answer(m, async () => 'up');
        }),
      1_200,
    );
    t.teardown(() => clearTimeout(late));
    t.equal(await call<string>(nc, 'akbe.test.wire.later2', {}, 500, { waitForResponderMs: 5_000 }), 'up');
    const abort = new AbortController();
    const t0 = Date.now();
    const pending = failure(
      call(nc, 'akbe.test.wire.never', {}, 20_000, { waitForResponderMs: 20_000, signal: abort.signal }),
    );
    setTimeout(() => abort.abort(new Error('rollout stopped')), 300);
    const err = await pending;
    t.match(err.message, /rollout stopped/);
    t.ok(Date.now() - t0 < 2_000, `ended ${Date.now() - t0} ms after it started, not at the 20 s wait`);
    // A closed connection, too, ends a wait for a responder at once.
    const caller = await nats.connectAs('orchestrator');
    const t1 = Date.now();
    const waiting = failure(call(caller, 'akbe.test.wire.never', {}, 20_000, { waitForResponderMs: 20_000 }));
    await new Promise((r) => setTimeout(r, 300));
    await caller.close();
    t.equal((await waiting).remoteName, 'ClosedConnectionError');
    t.ok(Date.now() - t1 < 2_000, `failed ${Date.now() - t1} ms after it started`);
  },
);

t.test('on a cluster, no responders is asked again until the service is back', async (t) => {
  // A one-node cluster (its INFO names a cluster): a service that reconnects from a lost node is
  // absent for a moment, and a caller must not fail at once as it does on a single server.
  const dir = mkdtempSync(join(tmpdir(), 'akbe-wire-cluster-'));
  const server = await startNatsServer({
    storeDir: join(dir, 'store'),
    auth: nats.authDir,
    // JetStream (always on) wants a route in a cluster: one to a port nobody listens on.
    args: [
      ...['--cluster_name', 'solo', '--cluster', 'nats://127.0.0.1:-1', '--name', 'solo-1'],
      ...['--routes', 'nats://127.0.0.1:9'],
    ],
  });
  const caller = await connectLocal(server);
  const service = await connectLocal(server);
  t.teardown(async () => {
    await caller.close();
    await service.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  t.equal(caller.info?.cluster, 'solo');
  const started = Date.now();
  const reply = call<{ back: boolean }>(caller, 'akbe.test.wire.later', {}, 20_000);
  await new Promise((r) => setTimeout(r, 1_000));
  service.subscribe('akbe.test.wire.later', {
    callback: (_e, m) => void answer(m, async () => ({ back: true })),
  });
  t.same(await reply, { back: true }, 'answered once the service subscribed');
  t.ok(Date.now() - started >= 1_000, `after ${Date.now() - started} ms`);
});
