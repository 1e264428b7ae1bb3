/**
 * The search tool (Search-R1's): `<search> query </search>` asks the search service
 * (`svc.search`, src/retrieval/service.ts, backed by an hnswlib index built with `akbe index build`)
 * for the top-k passages; the observation is Search-R1's `Doc i(Title: t) text` list, each
 * document cut to an equal share of the character budget (src/retrieval/observation.ts).
 */

import { formatObservation } from '../retrieval/observation.js';
import type { Json } from '../util/json.js';
import { type ObserveOptions, type ServiceCall, type Tool, ToolReplyError } from './tool.js';

/** The parsed arguments of a `<search>` call. */
export interface SearchArgs {
  query: string;
}

/** One retrieved passage as the service returns it (`contents` = `title\ntext`). */
export interface SearchToolHit {
  id: string;
  title: string;
  contents: string;
  score: number;
}

/** Settings of the search tool: passages per call. */
export interface SearchToolOptions {
  /** Passages per call (Search-R1: 3). */
  topK?: number;
}

function hitsOf(body: unknown): SearchToolHit[] {
  if (typeof body !== 'object' || body === null) throw new ToolReplyError('search', 'reply is not an object');
  const { results, error } = body as { results?: unknown; error?: unknown };
  if (typeof error === 'string') throw new ToolReplyError('search', `service error: ${error}`);
  if (!Array.isArray(results) || !Array.isArray(results[0]))
    throw new ToolReplyError('search', 'reply has no "results" list for the query');
  return (results[0] as unknown[]).map((h, i) => {
    const x = h as Partial<SearchToolHit> | null;
    if (!x || typeof x.id !== 'string' || typeof x.contents !== 'string' || typeof x.score !== 'number')
      throw new ToolReplyError('search', `results[0][${i}] needs id, contents (strings) and score (number)`);
    return {
      id: x.id,
      title: typeof x.title === 'string' ? x.title : '',
      contents: x.contents,
      score: x.score,
    };
  });
}

/** The search tool: `<search> query </search>` -> svc.search -> the top passages as an observation. */
export function searchTool(opts: SearchToolOptions = {}): Tool<SearchArgs, SearchToolHit[]> {
  const topk = opts.topK ?? 3;
  return {
    name: 'search',
    tag: 'search',
    service: 'search',
    parse(text: string): SearchArgs | null {
      const query = text.trim();
      return query === '' ? null : { query };
    },
    async call(args: SearchArgs, service: ServiceCall, signal?: AbortSignal): Promise<SearchToolHit[]> {
      return hitsOf(await service('search', { queries: [args.query], topk }, signal));
    },
    observe(hits: SearchToolHit[], o: ObserveOptions = {}): string {
      return formatObservation(hits, { maxChars: o.maxChars });
    },
    record(hits: SearchToolHit[]): { [key: string]: Json } {
      return { passageIds: hits.map((h) => h.id), scores: hits.map((h) => h.score) };
    },
  };
}
