/**
 * Who may talk to the dashboard. It serves training data to whoever can reach its port, so:
 *
 * - Host must name this server by an IP literal, `localhost`, or the bound host name. A page on
 *   another site that re-points its own domain at 127.0.0.1 (DNS rebinding) sends its domain as
 *   Host and is refused.
 * - Origin, when the browser sends one, must be this server's own (http://<Host>): another site's
 *   page cannot read the API or the event stream through the user's browser.
 * - Only GET and HEAD: the dashboard changes nothing.
 *
 * Pure: header values in, a verdict out.
 */
import { isIP } from 'node:net';

export type GuardVerdict = { ok: true } | { ok: false; status: 403 | 405; reason: string };

/** `host[:port]` → [hostname without brackets, port or null]. */
function splitHost(value: string): [string, number | null] {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(value.trim());
  if (!m) return ['', null];
  const name = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  return [name.toLowerCase(), m[2] === undefined ? null : Number(m[2])];
}

export function checkRequest(
  req: { method?: string; headers: { host?: string; origin?: string } },
  server: { host: string; port: number },
): GuardVerdict {
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return {
      ok: false,
      status: 405,
      reason: `method ${req.method} not allowed (the dashboard is read-only)`,
    };
  const host = req.headers.host;
  if (!host) return { ok: false, status: 403, reason: 'missing Host header' };
  const [name, port] = splitHost(host);
  const bound = server.host.toLowerCase();
  const nameOk = name === 'localhost' || isIP(name) !== 0 || name === bound;
  if (!nameOk || (port ?? 80) !== server.port)
    return { ok: false, status: 403, reason: `Host ${host} is not this dashboard` };
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${host}`)
    return { ok: false, status: 403, reason: `Origin ${origin} may not read this dashboard` };
  return { ok: true };
}
