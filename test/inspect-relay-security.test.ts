/**
 * Issue 11 item 7: the inspector relay, attacked as a web page in the user's browser or another
 * local client would: a foreign Origin, a foreign Host (DNS rebinding), a viewer injecting
 * messages, oversized and malformed messages, unbounded retention.
 */
import { request } from 'node:http';
import t, { type Test } from 'tap';
import { WebSocket } from 'ws';
import { type InspectorRelay, startInspectorRelay } from '../src/actors/inspect/inspect-relay.js';

const event = (i: number, pad = 0) =>
  JSON.stringify({ type: '@xstate.event', sessionId: 'x:0', event: { type: `e${i}`, pad: 'p'.repeat(pad) } });
const actor = (i: number) => JSON.stringify({ type: '@xstate.actor', sessionId: `x:${i}`, name: 'rollout' });

/** Opens a WebSocket; resolves to the open socket and its messages, or the HTTP status refusing it. */
function open(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ ws: WebSocket; msgs: string[] } | { refused: number }>((resolve) => {
    const ws = new WebSocket(url, { headers });
    const msgs: string[] = [];
    ws.on('message', (d) => msgs.push(String(d)));
    ws.once('open', () => resolve({ ws, msgs }));
    ws.once('unexpected-response', (_req, res) => resolve({ refused: res.statusCode ?? 0 }));
    ws.once('error', () => resolve({ refused: -1 }));
  });
}

async function openOk(url: string, headers: Record<string, string> = {}) {
  const r = await open(url, headers);
  if ('refused' in r) throw new Error(`refused with ${r.refused}`);
  return r;
}

function get(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

const settle = () => new Promise((r) => setTimeout(r, 150));

async function relayFor(t: Test, opts = {}): Promise<InspectorRelay> {
  const relay = await startInspectorRelay({ port: 0, ...opts });
  t.teardown(() => relay.close());
  return relay;
}

t.test('a foreign Origin is refused; the own page and non-browser clients are not', async (t) => {
  const relay = await relayFor(t);
  t.same(await open(relay.wsUrl, { Origin: 'https://evil.example' }), { refused: 403 });
  t.same(await open(relay.wsUrl, { Origin: 'http://localhost.evil.example' }), { refused: 403 });
  t.same(await open(relay.producerUrl, { Origin: 'https://evil.example' }), { refused: 403 }, 'token or not');
  const own = await openOk(relay.wsUrl, { Origin: `http://127.0.0.1:${relay.port}` });
  own.ws.close();
  const node = await openOk(relay.wsUrl);
  node.ws.close();
});

t.test('an allow-listed Origin is accepted', async (t) => {
  const relay = await relayFor(t, { allowOrigins: ['https://dash.example/'] });
  const ok = await openOk(relay.wsUrl, { Origin: 'https://dash.example' });
  ok.ws.close();
  t.same(await open(relay.wsUrl, { Origin: 'https://other.example' }), { refused: 403 });
});

t.test('a foreign Host (DNS rebinding) gets neither the page nor a socket', async (t) => {
  const relay = await relayFor(t);
  t.equal(await get(relay.port, `rebind.evil.example:${relay.port}`), 403);
  t.equal(await get(relay.port, `127.0.0.1:${relay.port}`), 200);
  t.equal(await get(relay.port, `localhost:${relay.port}`), 200);
  t.equal(await get(relay.port, 'localhost:1'), 403, 'the port is part of the Host');
  t.same(await open(relay.wsUrl, { Host: `rebind.evil.example:${relay.port}` }), { refused: 403 });
});

t.test('viewers are read-only: an injected message reaches nobody and the injector is cut off', async (t) => {
  const relay = await relayFor(t);
  const honest = await openOk(relay.wsUrl);
  const attacker = await openOk(relay.wsUrl);
  const closed = new Promise<number>((r) => {
    attacker.ws.once('close', (code) => r(code));
    setTimeout(() => r(-1), 3_000).unref(); // still open: the relay took the message
  });
  attacker.ws.send(event(1));
  t.equal(await closed, 1008, 'policy violation');
  const forged = await openOk(`${relay.wsUrl}/produce?token=${'0'.repeat(48)}`);
  forged.ws.send(event(2));
  await settle();
  t.same(honest.msgs, [], 'nothing relayed');
  t.equal(relay.relayed, 0);
  t.equal(relay.dropped, 2);
  const late = await openOk(relay.wsUrl);
  await settle();
  t.same(late.msgs, [], 'nothing kept for late viewers');
  // The producer, with the token, is relayed.
  const producer = await openOk(relay.producerUrl);
  producer.ws.send(event(3));
  await settle();
  t.same(honest.msgs, [event(3)]);
  for (const c of [honest, forged, late, producer]) c.ws.close();
});

t.test('oversized and malformed producer messages are dropped', async (t) => {
  const relay = await relayFor(t, { maxMessageBytes: 2_000 });
  const viewer = await openOk(relay.wsUrl);
  const producer = await openOk(relay.producerUrl);
  producer.ws.send(event(1, 5_000)); // over the cap
  producer.ws.send('not json');
  producer.ws.send(JSON.stringify({ type: 'evil', sessionId: 'x' }));
  producer.ws.send(JSON.stringify(['@xstate.event']));
  producer.ws.send(event(2));
  await settle();
  t.same(viewer.msgs, [event(2)]);
  t.equal(relay.dropped, 4);
  viewer.ws.close();
  producer.ws.close();
});

t.test('retention is capped in bytes, oldest ordinary messages first', async (t) => {
  const relay = await relayFor(t, { keepBytes: 20_000 });
  const producer = await openOk(relay.producerUrl);
  producer.ws.send(actor(0));
  for (let i = 0; i < 200; i++) producer.ws.send(event(i, 500));
  await settle();
  t.ok(relay.keptBytes <= 20_000, `kept ${relay.keptBytes} B`);
  const late = await openOk(relay.wsUrl);
  await settle();
  const bytes = late.msgs.reduce((a, m) => a + m.length, 0);
  t.ok(bytes <= 20_000, `a late viewer receives ${bytes} B`);
  t.equal(late.msgs[0], actor(0), 'the registration outlives ordinary messages');
  t.equal(late.msgs.at(-1), event(199, 500), 'the newest is kept');
  t.ok(late.msgs.length < 201, `${late.msgs.length} kept of 201`);
  late.ws.close();
  producer.ws.close();
});
