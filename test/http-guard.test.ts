/**
 * Issue 23 item 6: the guard's limits against the attacks themselves, over raw sockets to a real
 * http.Server from createGuardedServer: headers over maxHeaderBytes get 431, a client that never
 * finishes its headers (slowloris) or its body gets 408, and each connection is closed, while a
 * plain request is answered. Planted: the clientError mapping removed -> 400 instead of 431/408.
 */
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import t from 'tap';
import { createGuardedServer } from '../src/util/http-guard.js';

const server = createGuardedServer(
  { host: '127.0.0.1' },
  async (req, res) => {
    // Reads the whole body first, as the servers that take one do.
    for await (const _ of req);
    res.end('ok');
  },
  { maxHeaderBytes: 1024, headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 50 },
);
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => server.close(() => r())));
const port = (server.address() as AddressInfo).port;

/** Writes `chunks` (then waits, with the socket open) and resolves with all the server sent. */
function exchange(chunks: string[], holdMs = 2_000): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    let closed = false;
    s.on('data', (d) => {
      text += d.toString('latin1');
    });
    s.on('error', () => undefined);
    s.on('close', () => {
      closed = true;
      resolve({ text, closed });
    });
    s.on('connect', () => {
      for (const c of chunks) s.write(c);
    });
    setTimeout(() => {
      s.destroy();
      if (!closed) resolve({ text, closed: false });
    }, holdMs);
  });
}

t.test('a plain request is answered', async (t) => {
  const r = await exchange([`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`]);
  t.match(r.text, /^HTTP\/1\.1 200/);
});

t.test('headers over the limit: 431 and the connection closed', async (t) => {
  const big = `X-Fill: ${'a'.repeat(4096)}\r\n`;
  const r = await exchange([`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${big}\r\n`]);
  t.match(r.text, /^HTTP\/1\.1 431 Request Header Fields Too Large/);
  t.ok(r.closed, 'closed by the server');
});

t.test('slowloris (headers never finished): 408 and the connection closed', async (t) => {
  const r = await exchange([`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: 1\r\n`]);
  t.match(r.text, /^HTTP\/1\.1 408 Request Timeout/);
  t.ok(r.closed, 'closed by the server, well before the client gave up');
});

t.test('a body that never arrives: 408 and the connection closed', async (t) => {
  const r = await exchange([
    `POST / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nx`,
  ]);
  t.match(r.text, /^HTTP\/1\.1 408 Request Timeout/);
  t.ok(r.closed, 'closed by the server');
});
