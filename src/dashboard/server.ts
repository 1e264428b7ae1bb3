/**
 * `akbe dashboard`'s HTTP server: the page and its bundle (built by `npm run build` into
 * dist/dashboard, nothing fetched from elsewhere), a small read-only JSON API, and one
 * Server-Sent-Events stream that pushes every change the page shows:
 *
 *   GET /                               the page (hash routes: #/run/ID, #/run/ID/question/Q, …)
 *   GET /assets/app.js|app.css          the bundle
 *   GET /api/runs                       run summaries, newest first
 *   GET /api/runs/ID                    summary, config, one point per learner step (null: not yet)
 *   GET /api/runs/ID/questions          the run's questions with their latest boundary category
 *   GET /api/runs/ID/questions/Q        boundary history + rollout transcripts
 *   GET /api/runs/ID/audit              `akbe replay`'s audit of the run, computed on request, with
 *                                       the last `--verify-training` verdict kept for it (runsDir)
 *   GET /api/actors, /api/machines      the live actor tree; the statecharts of src/machines
 *   GET /api/experiments                `akbe experiment report` outputs
 *   GET /api/events                     SSE: run (summary + new point), nats, actors, resync
 *
 * Every request passes the shared guard (src/util/http-guard.ts: Host, Origin, GET/HEAD only, no
 * body, timeouts; a throw is answered, never a crash). SSE rather than a WebSocket: the
 * pushes go one way, and the browser's EventSource reconnects by itself after a dashboard restart.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { auditRunLog } from '../audit/audit.js';
import { readVerifyRecord } from '../audit/verify-record.js';
import type { AkbeEvent } from '../events/catalog.js';
import { createGuardedServer, type HttpLimits } from '../util/http-guard.js';
import type { ActorsFeed } from './actors-feed.js';
import { readExperiments } from './experiments.js';
import { machineDefinitions } from './machine-definitions.js';
import { questionView } from './question-view.js';
import { RunIndex } from './run-index.js';
import { DashboardNotFoundError, questionList, readRunLog } from './run-log-read.js';
import { stepPoint } from './run-view.js';
import type { DashboardSource, NatsLinkStatus } from './source.js';

export class DashboardPortInUseError extends Error {
  constructor(
    readonly port: number,
    opts?: ErrorOptions,
  ) {
    super(`dashboard port ${port} is in use: pick another with --port P (0 = any free port)`, opts);
    this.name = 'DashboardPortInUseError';
  }
}

export interface DashboardOptions {
  source: DashboardSource;
  /** Where `npm run build` put the bundle (index.html, app.js, app.css). */
  assetsDir: string;
  experimentsDir: string;
  /** `<home>/runs`: where `akbe replay --verify-training` keeps each run's verdict (audit panel). */
  runsDir?: string;
  actors?: ActorsFeed;
  /** Default 8090; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Host header values accepted besides localhost, IP literals and the bound host (--allow-host). */
  allowHosts?: string[];
  limits?: Partial<HttpLimits>;
}

export interface Dashboard extends AsyncDisposable {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

const ASSETS: Record<string, string> = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

const SECURITY_HEADERS = {
  'Content-Security-Policy':
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(body));
}

/** The open SSE streams: every push goes to each, and a comment line keeps idle ones open. */
class EventStreams {
  private readonly open = new Set<ServerResponse>();
  private readonly heartbeat = setInterval(() => {
    for (const res of this.open) res.write(': keep-alive\n\n');
  }, 15_000).unref();

  push(kind: string, data: unknown): void {
    const frame = `event: ${kind}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of this.open) res.write(frame);
  }

  add(req: IncomingMessage, res: ServerResponse, hello: unknown): void {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'Content-Type': 'text/event-stream',
      Connection: 'keep-alive',
    });
    // retry: the browser comes back within a second of a dashboard restart.
    res.write(`retry: 1000\nevent: hello\ndata: ${JSON.stringify(hello)}\n\n`);
    this.open.add(res);
    req.on('close', () => this.open.delete(res));
  }

  close(): void {
    clearInterval(this.heartbeat);
    for (const res of this.open) res.end();
    this.open.clear();
  }
}

/**
 * Keeps `index` current from `source` and pushes each change: live events first, then the
 * bounded read, so nothing falls between the two (duplicates are dropped); after an outage, a
 * catch-up read and a resync. `loaded()` settles once the latest read is in.
 */
async function followSource(
  source: DashboardSource,
  actors: ActorsFeed | undefined,
  index: RunIndex,
  streams: EventStreams,
): Promise<{ loaded: () => Promise<void>; stop: () => void }> {
  const pushRun = (runId: string, e?: AkbeEvent) =>
    streams.push('run', {
      runId,
      summary: index.summary(runId),
      point: e?.type === 'learner.step' ? stepPoint(e) : undefined,
    });
  const offEvent = source.onEvent((e) => {
    if (index.add(e)) pushRun(e.meta.runId, e);
  });
  index.merge(await source.runLevelEvents());
  let loaded = Promise.resolve();
  const offStatus = source.onStatus((s: NatsLinkStatus) => {
    streams.push('nats', s);
    if (!s.connected) return;
    // Back after an outage: catch up on what was published meanwhile, then let pages re-read.
    loaded = source
      .runLevelEvents()
      .then((byRun) => {
        for (const runId of index.merge(byRun)) pushRun(runId);
        streams.push('resync', {});
      })
      .catch(() => undefined);
  });
  const offActors = actors?.onChange((delta) => streams.push('actors', delta));
  return {
    loaded: () => loaded,
    stop: () => {
      offEvent();
      offStatus();
      offActors?.();
    },
  };
}

interface ApiContext {
  source: DashboardSource;
  actors?: ActorsFeed;
  index: RunIndex;
  loaded: () => Promise<void>;
  experimentsDir: string;
  runsDir?: string;
}

/** The JSON API: `path` is what follows /api/, decoded. */
async function answerApi(ctx: ApiContext, path: string[]): Promise<unknown> {
  const { source, actors, index } = ctx;
  const [first, runId, sub, questionId] = path;
  if (first === 'runs' && runId === undefined) {
    await ctx.loaded();
    return { runs: index.summaries(), undecodable: source.undecodable };
  }
  if (first === 'runs' && sub === undefined) {
    await ctx.loaded();
    // null, not 404: a page may wait for a run that has not started yet (and a 404 would be a
    // console error in the browser).
    return index.view(runId);
  }
  if (first === 'runs' && sub === 'questions') {
    const log = await readRunLog(source, runId);
    if (questionId === undefined) return questionList(log);
    return (
      questionView(log, questionId) ??
      Promise.reject(new DashboardNotFoundError(`question ${questionId} of run ${runId}`))
    );
  }
  if (first === 'runs' && sub === 'audit') {
    const report = auditRunLog(await readRunLog(source, runId));
    const verifyTraining = ctx.runsDir ? await readVerifyRecord(ctx.runsDir, runId) : null;
    return { verdict: report.mismatches.length === 0 ? 'clean' : 'mismatch', report, verifyTraining };
  }
  if (first === 'actors') return actors?.snapshot() ?? { relays: [], actors: [], definitions: {} };
  if (first === 'machines') return machineDefinitions();
  if (first === 'experiments')
    return { dir: ctx.experimentsDir, experiments: await readExperiments(ctx.experimentsDir) };
  throw new DashboardNotFoundError(`/api/${path.join('/')}`);
}

/** One request: the page, its bundle, the event stream or the API; every failure answered. */
async function handleRequest(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: ApiContext & { assetsDir: string; streams: EventStreams },
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://dashboard');
  try {
    // Inside the try: a bad percent-encoding (`/%E0%A4%A`) is a 400, not a crash.
    let parts: string[];
    try {
      parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      return sendJson(res, 400, { error: `bad percent-encoding in ${url.pathname}` });
    }
    if (parts.length === 0) {
      const html = await readFile(join(ctx.assetsDir, 'index.html'));
      res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': 'text/html; charset=utf-8' });
      res.end(html);
    } else if (parts[0] === 'assets' && parts.length === 2 && Object.hasOwn(ASSETS, parts[1])) {
      const body = await readFile(join(ctx.assetsDir, parts[1]));
      res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': ASSETS[parts[1]] });
      res.end(body);
    } else if (parts[0] === 'api' && parts[1] === 'events' && parts.length === 2)
      ctx.streams.add(req, res, { nats: ctx.source.status, relays: ctx.actors?.relays() ?? [] });
    else if (parts[0] === 'api') sendJson(res, 200, await answerApi(ctx, parts.slice(1)));
    else throw new DashboardNotFoundError(url.pathname);
  } catch (err) {
    if (res.headersSent) return void res.end();
    const e = err as NodeJS.ErrnoException;
    if (e instanceof DashboardNotFoundError) sendJson(res, 404, { error: e.message });
    else if (e.code === 'ENOENT')
      // 503, not 500: the server works, its page is not built yet (a fresh clone, before npm run build).
      sendJson(res, 503, { error: `dashboard bundle missing (${e.path}): run npm run build` });
    else sendJson(res, 502, { error: e.message ?? String(err) });
  }
}

export async function startDashboard(opts: DashboardOptions): Promise<Dashboard> {
  const host = opts.host ?? '127.0.0.1';
  const { source, actors } = opts;
  const index = new RunIndex();
  const streams = new EventStreams();
  const follow = await followSource(source, actors, index, streams);
  const ctx = {
    source,
    actors,
    index,
    loaded: follow.loaded,
    experimentsDir: opts.experimentsDir,
    runsDir: opts.runsDir,
  };
  const http: Server = createGuardedServer(
    { host, allowHosts: opts.allowHosts, methods: ['GET', 'HEAD'], maxBodyBytes: 0 },
    (req, res) => handleRequest(req, res, { ...ctx, assetsDir: opts.assetsDir, streams }),
    opts.limits,
  );
  const port = await new Promise<number>((resolve, reject) => {
    http.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE' ? new DashboardPortInUseError(opts.port ?? 8090, { cause: err }) : err,
      ),
    );
    http.listen(opts.port ?? 8090, host, () => resolve((http.address() as AddressInfo).port));
  }).catch((err) => {
    streams.close();
    follow.stop();
    throw err;
  });
  const shown = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  let closing: Promise<void> | null = null;
  const dashboard: Dashboard = {
    url: `http://${shown}:${port}/`,
    port,
    close() {
      closing ??= (async () => {
        follow.stop();
        streams.close();
        http.closeAllConnections();
        await new Promise<void>((r) => http.close(() => r()));
      })();
      return closing;
    },
    [Symbol.asyncDispose]() {
      return dashboard.close();
    },
  };
  return dashboard;
}
