/**
 * The search service: NATS request/reply on `akbe.<run>.svc.search`, queue group `search`, so
 * several replicas share the load and each request is answered once. Wire format and validation:
 * src/retrieval/search-request.ts.
 *
 * Batching: requests that arrive while a search is running (or in the same event-loop turn)
 * are answered by one embedding + HNSW call, the pattern that keeps e5 efficient under the
 * hundreds of concurrent rollouts of a GRPO step. A malformed request gets an error reply (or a
 * dead letter) and never disturbs the others.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { EdgeGate, EdgeRejectedError } from '../../../events/edge-gate.js';
import { serviceSubject } from '../../../events/subjects.js';
import {
  DEFAULT_LIMITS,
  DEFAULT_TOPK,
  type RequestLimits,
  SEARCH_QUEUE,
  type SearchRequest,
  SearchServiceError,
  validateSearchRequest,
} from '../../../retrieval/search-request.js';
import type { SearchBackend, SearchHit } from '../../../retrieval/searcher.js';
import { type ResendOptions, requestResending, SERVICE_START_WAIT_MS } from '../../nats/resend-request.js';

/** `akbe.<run>.svc.search` (subject names live in src/events/subjects.ts). */
export function searchSubject(runId: string): string {
  return serviceSubject(runId, 'search');
}

export interface SearchServiceOptions {
  runId: string;
  queue?: string;
  limits?: RequestLimits;
  /** Most queries answered by one backend call (requests are never split). */
  maxBatchQueries?: number;
  /**
   * A benchmark and testing knob: every reply leaves this many ms after its results are ready, as
   * from a remote retrieval server (requests in the meantime are still searched; default 0).
   */
  searchLatencyMs?: number;
}

interface Pending {
  msg: Msg;
  req: SearchRequest;
}

export class SearchService implements AsyncDisposable {
  readonly subject: string;
  /** Counters for logs and tests. */
  readonly stats = { requests: 0, errors: 0, batches: 0, queries: 0 };
  private readonly sub: Subscription;
  /** Refuses malformed requests: answered with `{error}`, or dead-lettered when they have no reply subject. */
  readonly edge: EdgeGate;
  private queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private readonly limits: RequestLimits;
  private readonly maxBatchQueries: number;
  private readonly latencyMs: number;
  /** Replies held back by `searchLatencyMs`. */
  private readonly delayed = new Set<Promise<void>>();

  private constructor(
    nc: NatsConnection,
    private readonly backend: SearchBackend,
    opts: SearchServiceOptions,
  ) {
    this.subject = searchSubject(opts.runId);
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    this.maxBatchQueries = opts.maxBatchQueries ?? 512;
    this.latencyMs = opts.searchLatencyMs ?? 0;
    this.edge = new EdgeGate(nc, {
      detectedBy: 'svc.search',
      respondError: (msg, err) => {
        if (!msg.respond(JSON.stringify({ error: err.message }))) throw new Error('no reply subject');
      },
    });
    this.sub = nc.subscribe(this.subject, {
      queue: opts.queue ?? SEARCH_QUEUE,
      callback: (err, msg) => {
        if (!err) this.onMessage(msg);
      },
    });
  }

  /** Subscribes and starts answering. */
  static start(nc: NatsConnection, backend: SearchBackend, opts: SearchServiceOptions): SearchService {
    return new SearchService(nc, backend, opts);
  }

  private onMessage(msg: Msg): void {
    this.stats.requests++;
    const req = this.edge.admit(msg, (data) => this.decode(data));
    if (!req) {
      this.stats.errors++;
      return;
    }
    this.queue.push({ msg, req });
    this.draining ??= this.drain().finally(() => {
      this.draining = null;
    });
  }

  private decode(data: Uint8Array): SearchRequest {
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data));
    } catch (e) {
      throw new EdgeRejectedError('undecodable', `request is not valid JSON: ${(e as Error).message}`);
    }
    try {
      return validateSearchRequest(body, this.limits);
    } catch (e) {
      throw new EdgeRejectedError('invalid', (e as Error).message, { cause: e });
    }
  }

  private async drain(): Promise<void> {
    // Yield once so that requests delivered in the same socket read join the first batch.
    await new Promise((r) => setImmediate(r));
    while (this.queue.length > 0) {
      const batch: Pending[] = [];
      let n = 0;
      while (
        this.queue.length > 0 &&
        (batch.length === 0 || n + this.queue[0].req.queries.length <= this.maxBatchQueries)
      ) {
        const p = this.queue.shift()!;
        batch.push(p);
        n += p.req.queries.length;
      }
      await this.answer(batch);
    }
  }

  private async answer(batch: Pending[]): Promise<void> {
    const queries = batch.flatMap((p) => p.req.queries);
    const k = Math.max(...batch.map((p) => p.req.topk));
    this.stats.batches++;
    this.stats.queries += queries.length;
    let results: SearchHit[][];
    try {
      results = await this.backend.search(queries, k);
    } catch (e) {
      this.stats.errors += batch.length;
      for (const p of batch)
        p.msg.respond(JSON.stringify({ error: `search failed: ${(e as Error).message}` }));
      return;
    }
    let at = 0;
    const replies = batch.map((p) => {
      const mine = results.slice(at, at + p.req.queries.length).map((hits) => hits.slice(0, p.req.topk));
      at += p.req.queries.length;
      return () => p.msg.respond(JSON.stringify({ results: mine }));
    });
    if (this.latencyMs <= 0) {
      for (const reply of replies) reply();
      return;
    }
    const later = new Promise<void>((r) => setTimeout(r, this.latencyMs)).then(() => {
      for (const reply of replies) reply();
    });
    this.delayed.add(later);
    void later.finally(() => this.delayed.delete(later));
  }

  /** Stops taking requests and answers those already queued. */
  async stop(): Promise<void> {
    await this.sub.drain();
    while (this.draining) await this.draining;
    await Promise.all(this.delayed);
    await this.edge.settled();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Calls the search service: top-k passages for each query (a service still starting is waited for). */
export async function requestSearch(
  nc: NatsConnection,
  runId: string,
  queries: string[],
  topk = DEFAULT_TOPK,
  timeoutMs = 30_000,
  opts: ResendOptions = {},
): Promise<SearchHit[][]> {
  const subject = searchSubject(runId);
  const reply = await requestResending(nc, subject, JSON.stringify({ queries, topk }), timeoutMs, {
    waitForResponderMs: SERVICE_START_WAIT_MS,
    ...opts,
  });
  let body: { results?: SearchHit[][]; error?: string };
  try {
    body = JSON.parse(reply.string());
  } catch (e) {
    throw new SearchServiceError('reply is not valid JSON', subject, { cause: e });
  }
  if (typeof body.error === 'string') throw new SearchServiceError(body.error, subject);
  if (!Array.isArray(body.results)) throw new SearchServiceError('reply has no "results"', subject);
  return body.results;
}
