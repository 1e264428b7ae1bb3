/**
 * The search service's wire format and its validation, shared by the NATS service
 * (src/actors/services/search/search-service.ts) and Search-R1's HTTP endpoint (http.ts).
 *
 * Wire format: UTF-8 JSON (text passages dominate the payload, and JSON lets any NATS client,
 * e.g. the `nats` CLI or a Python rollout worker, call the service).
 *   request  {"queries": ["who wrote hamlet", ...], "topk": 3}         topk optional (default 3)
 *   reply    {"results": [[{"id","title","contents","score"}, ...], ...]}  one list per query
 *   error    {"error": "one line saying what was wrong"}
 *
 */
export const SEARCH_QUEUE = 'search';
export const DEFAULT_TOPK = 3;

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
