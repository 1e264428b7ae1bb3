/**
 * `akbe index build|search|serve`: the search tool from the command line. Heavy modules
 * (hnswlib, onnxruntime, NATS) load inside `run`.
 */

import { DEFAULT_CHUNK_QUERIES, DEFAULT_MAX_BODY_BYTES } from '../../retrieval/http.js';
import { DEFAULT_RETRIEVE_LIMITS } from '../../retrieval/retrieve-request.js';
import {
  type CommandSpec,
  choiceFlag,
  intFlag,
  optionalString,
  requireString,
  UsageError,
} from '../command.js';
import { ALLOW_HOST_FLAG, NATS_TRUST_FLAGS } from '../common-flags.js';

const modelFlags = {
  model: {
    type: 'string',
    value: 'FILE',
    description: 'e5: ONNX BERT encoder (input_ids/attention_mask/token_type_ids -> last_hidden_state)',
  },
  vocab: { type: 'string', value: 'FILE', description: 'e5: vocab.txt or tokenizer.json (WordPiece)' },
} as const;

const build: CommandSpec = {
  path: ['index', 'build'],
  summary: 'Build a search index (HNSW, inner product) from a Search-R1 JSONL corpus {"id","contents"}',
  flags: {
    corpus: {
      type: 'string',
      value: 'FILE',
      description: 'JSONL corpus, one {"id","contents"} per line (title = first line of contents)',
    },
    out: {
      type: 'string',
      value: 'DIR',
      description: 'index directory (written atomically; an earlier index there is replaced)',
    },
    embedder: {
      type: 'string',
      value: 'KIND',
      description: 'lexical (hashed TF-IDF, no download) or e5',
      default: 'lexical',
    },
    ...modelFlags,
    dim: { type: 'string', value: 'N', description: 'lexical: vector length', default: '1024' },
    m: { type: 'string', value: 'N', description: 'HNSW links per node (M)', default: '16' },
    'ef-construction': {
      type: 'string',
      value: 'N',
      description: 'HNSW build candidate list size',
      default: '200',
    },
    'batch-size': { type: 'string', value: 'N', description: 'passages per embedding call', default: '64' },
    threads: { type: 'string', value: 'N', description: 'e5: onnxruntime intra-op threads', default: '1' },
  },
  async run(ctx) {
    const corpus = requireString(ctx, 'corpus');
    const out = requireString(ctx, 'out');
    const kind = choiceFlag(ctx, 'embedder', ['lexical', 'e5'] as const, 'lexical')!;
    const hnsw = {
      m: intFlag(ctx, 'm', { min: 2, max: 256 })!,
      efConstruction: intFlag(ctx, 'ef-construction', { min: 8, max: 4096 })!,
    };
    const batchSize = intFlag(ctx, 'batch-size', { min: 1, max: 8192 })!;
    const { buildIndex } = await import('../../retrieval/store.js');
    let embedder: Parameters<typeof buildIndex>[0]['embedder'];
    if (kind === 'e5') {
      const model = optionalString(ctx, 'model');
      const vocab = optionalString(ctx, 'vocab');
      if (!model || !vocab) throw new UsageError('--embedder e5 needs --model FILE and --vocab FILE');
      embedder = { kind, model, vocab, threads: intFlag(ctx, 'threads', { min: 1, max: 256 }) };
    } else {
      embedder = { kind, params: { dim: intFlag(ctx, 'dim', { min: 8, max: 65536 }) } };
    }
    // Ctrl-C stops between batches so the temporary build directory is removed.
    const abort = new AbortController();
    const onSignal = () => abort.abort(new Error('interrupted; no index was written'));
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    let meta: Awaited<ReturnType<typeof buildIndex>>;
    try {
      meta = await buildIndex({
        corpus,
        out,
        embedder,
        hnsw,
        batchSize,
        progress: ctx.err,
        signal: abort.signal,
      });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    ctx.out.write(
      `built ${out}: ${meta.count} passages, ${meta.fingerprint}, ${meta.buildSeconds.toFixed(1)} s\n`,
    );
  },
};

const search: CommandSpec = {
  path: ['index', 'search'],
  summary: 'Query an index: top-k passages with scores',
  flags: {
    index: { type: 'string', value: 'DIR', description: 'index directory (from akbe index build)' },
    query: { type: 'string', value: 'TEXT', description: 'query text (repeat for several)', multiple: true },
    topk: { type: 'string', short: 'k', value: 'N', description: 'passages per query', default: '3' },
    ef: { type: 'string', value: 'N', description: 'HNSW search candidate list size (>= k)', default: '64' },
    json: { type: 'boolean', description: 'print the results as JSON' },
    observation: { type: 'boolean', description: 'print the observation text a rollout would see' },
    ...modelFlags,
  },
  async run(ctx) {
    const dir = requireString(ctx, 'index');
    const queries = (ctx.flags.query as string[] | undefined) ?? [];
    if (queries.length === 0) throw new UsageError('missing required flag --query');
    const k = intFlag(ctx, 'topk', { min: 1, max: 1000 })!;
    const ef = intFlag(ctx, 'ef', { min: 1, max: 100000 })!;
    const { IndexSearcher } = await import('../../retrieval/searcher.js');
    const { formatObservation } = await import('../../retrieval/observation.js');
    await using searcher = await IndexSearcher.open(dir, {
      model: optionalString(ctx, 'model'),
      vocab: optionalString(ctx, 'vocab'),
      ef,
    });
    const results = await searcher.search(queries, k, ef);
    if (ctx.flags.json) {
      ctx.out.write(
        `${JSON.stringify(
          queries.map((query, i) => ({ query, results: results[i] })),
          null,
          2,
        )}\n`,
      );
      return;
    }
    queries.forEach((query, i) => {
      ctx.out.write(`${queries.length > 1 ? '\n' : ''}query: ${query}\n`);
      if (ctx.flags.observation) {
        ctx.out.write(formatObservation(results[i]));
        return;
      }
      results[i].forEach((h, j) => {
        const text = h.contents.slice(h.title.length + 1).replace(/\s+/g, ' ');
        ctx.out.write(
          `${j + 1}. ${h.score.toFixed(4)}  ${h.title}  [${h.id}]\n   ${text.length > 160 ? `${text.slice(0, 157)}...` : text}\n`,
        );
      });
    });
  },
};

const serve: CommandSpec = {
  path: ['index', 'serve'],
  summary:
    'Serve an index on NATS akbe.<run>.svc.search (--nats, NATS_URL, a running `akbe nats up`, or an embedded server) and optionally Search-R1 POST /retrieve (--http)',
  flags: {
    index: { type: 'string', value: 'DIR', description: 'index directory' },
    http: {
      type: 'string',
      value: 'PORT',
      description: 'also serve POST /retrieve on this port (0 = any free port)',
    },
    host: { type: 'string', value: 'HOST', description: 'HTTP bind address', default: '127.0.0.1' },
    'allow-host': ALLOW_HOST_FLAG,
    nats: {
      type: 'string',
      value: 'URL',
      description: 'NATS server (default: $NATS_URL, then akbe nats up, then embedded)',
    },
    ...NATS_TRUST_FLAGS,
    'http-only': { type: 'boolean', description: 'serve only the HTTP endpoint (no NATS)' },
    run: {
      type: 'string',
      value: 'ID',
      description: 'run id: the service answers on akbe.<run>.svc.search',
      default: 'dev',
    },
    ef: { type: 'string', value: 'N', description: 'HNSW search candidate list size', default: '64' },
    'max-queries': {
      type: 'string',
      value: 'N',
      description: 'HTTP: queries per request (Search-R1 GRPO sends 512 x 5 = 2,560)',
      default: String(DEFAULT_RETRIEVE_LIMITS.maxQueries),
    },
    'max-query-chars': {
      type: 'string',
      value: 'N',
      description: 'HTTP: characters per query',
      default: String(DEFAULT_RETRIEVE_LIMITS.maxQueryChars),
    },
    'max-topk': {
      type: 'string',
      value: 'N',
      description: 'HTTP: passages per query',
      default: String(DEFAULT_RETRIEVE_LIMITS.maxTopk),
    },
    'max-body-bytes': {
      type: 'string',
      value: 'N',
      description: 'HTTP: request body size',
      default: String(DEFAULT_MAX_BODY_BYTES),
    },
    chunk: {
      type: 'string',
      value: 'N',
      description: 'HTTP: queries searched at once; replies stream chunk by chunk',
      default: String(DEFAULT_CHUNK_QUERIES),
    },
    ...modelFlags,
  },
  async run(ctx) {
    const dir = requireString(ctx, 'index');
    const port = intFlag(ctx, 'http', { min: 0, max: 65535 });
    const httpOnly = ctx.flags['http-only'] === true;
    const runId = requireString(ctx, 'run');
    const ef = intFlag(ctx, 'ef', { min: 1, max: 100000 })!;
    if (httpOnly && port === undefined) throw new UsageError('--http-only needs --http PORT');
    const { searchSubject } = await import('../../actors/services/search/search-service.js');
    try {
      searchSubject(runId);
    } catch {
      throw new UsageError(`--run '${runId}' must be one NATS subject token (letters, digits, _ and -)`);
    }
    const { IndexSearcher } = await import('../../retrieval/searcher.js');
    const searcher = await IndexSearcher.open(dir, {
      model: optionalString(ctx, 'model'),
      vocab: optionalString(ctx, 'vocab'),
      ef,
    });
    const stops: Array<() => Promise<void>> = [() => searcher.close()];
    try {
      if (!httpOnly) {
        const { connectAkbeNats } = await import('../../actors/nats/connection.js');
        const { SearchService } = await import('../../actors/services/search/search-service.js');
        const nats = await connectAkbeNats({
          url: optionalString(ctx, 'nats'),
          name: `akbe-search-${runId}`,
          // The search role's key: answering svc.search is all this process may do on NATS.
          role: 'search',
        });
        const service = SearchService.start(nats.nc, searcher, { runId });
        stops.unshift(async () => {
          await service.stop();
          await nats.close();
        });
        ctx.out.write(
          `search service on ${nats.url} (${nats.source}) subject ${service.subject} (queue group search)\n`,
        );
      }
      if (port !== undefined) {
        const { startRetrievalHttpServer } = await import('../../retrieval/http.js');
        const http = await startRetrievalHttpServer(searcher, {
          port,
          host: optionalString(ctx, 'host'),
          allowHosts: ctx.flags['allow-host'] as string[] | undefined,
          limits: {
            maxQueries: intFlag(ctx, 'max-queries', { min: 1 })!,
            maxQueryChars: intFlag(ctx, 'max-query-chars', { min: 1 })!,
            maxTopk: intFlag(ctx, 'max-topk', { min: 1 })!,
          },
          maxBodyBytes: intFlag(ctx, 'max-body-bytes', { min: 1024 })!,
          chunkQueries: intFlag(ctx, 'chunk', { min: 1 })!,
        });
        stops.unshift(() => http.close());
        ctx.out.write(`retrieval endpoint: POST ${http.url}/retrieve\n`);
      }
      ctx.out.write(
        `serving ${dir} (${searcher.meta.count} passages, ${searcher.meta.fingerprint}); Ctrl-C stops\n`,
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
    } finally {
      for (const stop of stops) await stop();
    }
  },
};

export const indexCommands: CommandSpec[] = [build, search, serve];
