/**
 * The search service: NATS request/reply on `akbe.<run>.svc.search`, queue group `search`, so
 * several replicas share the load and each request is answered once.
 *
 * Wire format: UTF-8 JSON (text passages dominate the payload, and JSON lets any NATS client,
 * e.g. the `nats` CLI or a Python rollout worker, call the service).
 *   request  {"queries": ["who wrote hamlet", ...], "topk": 3}         topk optional (default 3)
 *   reply    {"results": [[{"id","title","contents","score"}, ...], ...]}  one list per query
 *   error    {"error": "one line saying what was wrong"}
 *
 * Batching: requests that arrive while a search is running (or in the same event-loop turn)
 * are answered by one embedding + HNSW call, the pattern that keeps e5 efficient under the
 * hundreds of concurrent rollouts of a GRPO step. A malformed request gets an error reply and
 * never disturbs the others.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { serviceSubject } from '../events/subjects.js';
import type { SearchBackend, SearchHit } from './searcher.js';

export const SEARCH_QUEUE = 'search';
export const DEFAULT_TOPK = 3;

/** `akbe.<run>.svc.search` (subject names live in src/events/subjects.ts). */
export function searchSubject(runId: string): string {
  return serviceSubject(runId, 'search');
}

export interface SearchRequest {
  queries: string[];
  topk: number;
}

export class BadSearchRequestError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BadSearchRequestError';
  }
}

/** The service answered with `{error}` (or the reply could not be decoded). */
export class SearchServiceError extends Error {
  constructor(
    message: string,
    readonly subject: string,
    options?: ErrorOptions,
  ) {
    super(`${subject}: ${message}`, options);
    this.name = 'SearchServiceError';
  }
}

export interface RequestLimits {
  maxQueries: number;
  maxTopk: number;
  maxQueryChars: number;
}

export const DEFAULT_LIMITS: RequestLimits = { maxQueries: 256, maxTopk: 100, maxQueryChars: 4096 };

/** Validates a decoded request body (shared with the HTTP endpoint). */
export function validateSearchRequest(body: unknown, limits: RequestLimits = DEFAULT_LIMITS): SearchRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadSearchRequestError('request must be a JSON object {"queries": [...], "topk": N}');
  const { queries, topk } = body as Record<string, unknown>;
  if (!Array.isArray(queries)) throw new BadSearchRequestError('"queries" must be an array of strings');
  if (queries.length > limits.maxQueries)
    throw new BadSearchRequestError(
      `"queries" has ${queries.length} entries; at most ${limits.maxQueries} per request`,
    );
  queries.forEach((q, i) => {
    if (typeof q !== 'string') throw new BadSearchRequestError(`"queries[${i}]" must be a string`);
    if (q.length > limits.maxQueryChars)
      throw new BadSearchRequestError(`"queries[${i}]" is longer than ${limits.maxQueryChars} characters`);
  });
  let k = DEFAULT_TOPK;
  if (topk !== undefined && topk !== null) {
    if (typeof topk !== 'number' || !Number.isInteger(topk) || topk < 1 || topk > limits.maxTopk) {
      throw new BadSearchRequestError(`"topk" must be an integer in [1, ${limits.maxTopk}]`);
    }
    k = topk;
  }
  return { queries: queries as string[], topk: k };
}

export interface SearchServiceOptions {
  runId: string;
  queue?: string;
  limits?: RequestLimits;
  /** Most queries answered by one backend call (requests are never split). */
  maxBatchQueries?: number;
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
  private queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private readonly limits: RequestLimits;
  private readonly maxBatchQueries: number;

  private constructor(
    nc: NatsConnection,
    private readonly backend: SearchBackend,
    opts: SearchServiceOptions,
  ) {
    this.subject = searchSubject(opts.runId);
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    this.maxBatchQueries = opts.maxBatchQueries ?? 512;
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
    let req: SearchRequest;
    try {
      req = validateSearchRequest(JSON.parse(msg.string()), this.limits);
    } catch (e) {
      this.stats.errors++;
      const reason =
        e instanceof BadSearchRequestError ? e.message : `request is not valid JSON: ${(e as Error).message}`;
      msg.respond(JSON.stringify({ error: reason }));
      return;
    }
    this.queue.push({ msg, req });
    this.draining ??= this.drain().finally(() => {
      this.draining = null;
    });
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
    for (const p of batch) {
      const mine = results.slice(at, at + p.req.queries.length).map((hits) => hits.slice(0, p.req.topk));
      at += p.req.queries.length;
      p.msg.respond(JSON.stringify({ results: mine }));
    }
  }

  /** Stops taking requests and answers those already queued. */
  async stop(): Promise<void> {
    await this.sub.drain();
    while (this.draining) await this.draining;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Calls the search service: top-k passages for each query. */
export async function requestSearch(
  nc: NatsConnection,
  runId: string,
  queries: string[],
  topk = DEFAULT_TOPK,
  timeoutMs = 30_000,
): Promise<SearchHit[][]> {
  const subject = searchSubject(runId);
  const reply = await nc.request(subject, JSON.stringify({ queries, topk }), { timeout: timeoutMs });
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
