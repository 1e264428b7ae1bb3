/**
 * A token-in/token-out client of any OpenAI-compatible completions server that has vLLM's token
 * extensions (vLLM, SGLang's OpenAI endpoint, akbe's own `akbe policy serve --http`):
 *
 *   request   prompt as token ids, seed, stop_token_ids, stop strings with
 *             include_stop_str_in_output, skip_special_tokens false, logprobs 0,
 *             return_token_ids and return_tokens_as_token_ids
 *   response  the generated ids from `choices[0].token_ids`, or parsed from the `token_id:<id>`
 *             strings of logprobs.tokens when the server only has the older flag; their logprobs
 *             from logprobs.token_logprobs
 *
 * The ids come back as the engine sampled them, never re-tokenized from text. Every response is
 * checked (ids, logprob count, finish reason) and a server error is an EngineError with the
 * server's own message.
 */
import type { FinishReason } from '../util/finish-reason.js';

export class EngineError extends Error {
  constructor(
    readonly url: string,
    message: string,
    readonly status: number | null = null,
    opts?: ErrorOptions,
  ) {
    super(`${url}: ${message}`, opts);
    this.name = 'EngineError';
  }
}

export interface EngineGenerate {
  prompt: number[];
  maxNewTokens: number;
  seed: number;
  temperature: number;
  topP: number;
  stopTokens?: number[];
  stopStrings?: string[];
}

export interface EngineResult {
  tokens: number[];
  /** log pi of each token as the engine reports it (vLLM: the raw model logprobs, temperature 1). */
  logprobs: number[];
  finish: FinishReason;
}

export interface CompletionsClientOptions {
  apiKey?: string;
  /** The model id to request; default: the first model the server lists. */
  model?: string;
  /** Per request; default 120 s. */
  timeoutMs?: number;
}

interface ModelCard {
  id: string;
  max_model_len?: number;
}

export class CompletionsClient {
  /** e.g. http://127.0.0.1:8000/v1 */
  readonly base: string;
  private card: Promise<ModelCard> | null = null;

  constructor(
    url: string,
    private readonly opts: CompletionsClientOptions = {},
  ) {
    const trimmed = url.replace(/\/+$/, '');
    if (!/^https?:\/\//.test(trimmed))
      throw new EngineError(
        url,
        'an engine URL starts with http:// or https:// (e.g. http://127.0.0.1:8000/v1)',
      );
    this.base = trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
  }

  private async fetchJson(path: string, body?: unknown): Promise<unknown> {
    const url = path.startsWith('/v1/') ? `${this.base}${path.slice(3)}` : `${this.base.slice(0, -3)}${path}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method: body === undefined ? 'GET' : 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 120_000),
      });
    } catch (err) {
      throw new EngineError(url, `cannot reach the engine (${(err as Error).message})`, null, { cause: err });
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new EngineError(url, `HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`, res.status);
    }
    if (!res.ok) {
      const e = json as { error?: { message?: string }; message?: string };
      throw new EngineError(
        url,
        `HTTP ${res.status}: ${e?.error?.message ?? e?.message ?? text.slice(0, 200)}`,
        res.status,
      );
    }
    return json;
  }

  /** The served model's card (id, max_model_len), fetched once. */
  model(): Promise<ModelCard> {
    this.card ??= (async () => {
      const list = (await this.fetchJson('/v1/models')) as { data?: ModelCard[] };
      const cards = Array.isArray(list?.data) ? list.data : [];
      const card = this.opts.model ? cards.find((c) => c.id === this.opts.model) : cards[0];
      if (!card)
        throw new EngineError(
          this.base,
          this.opts.model
            ? `serves no model ${this.opts.model} (it has ${cards.map((c) => c.id).join(', ')})`
            : 'lists no model',
        );
      return card;
    })();
    this.card.catch(() => {
      this.card = null; // a later call retries
    });
    return this.card;
  }

  /** One completion, token ids in and out. */
  async generate(req: EngineGenerate): Promise<EngineResult> {
    const card = await this.model();
    const room = card.max_model_len === undefined ? req.maxNewTokens : card.max_model_len - req.prompt.length;
    const maxTokens = Math.min(req.maxNewTokens, room);
    if (maxTokens < 1) return { tokens: [], logprobs: [], finish: 'length' };
    const url = `${this.base}/completions`;
    const body = (await this.fetchJson('/v1/completions', {
      model: card.id,
      prompt: req.prompt,
      max_tokens: maxTokens,
      temperature: req.temperature,
      top_p: req.topP,
      seed: req.seed,
      n: 1,
      stop: req.stopStrings?.length ? req.stopStrings : undefined,
      stop_token_ids: req.stopTokens?.length ? req.stopTokens : undefined,
      include_stop_str_in_output: true,
      skip_special_tokens: false,
      logprobs: 0,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
    })) as { choices?: unknown[] };
    const choice = body?.choices?.[0] as
      | {
          token_ids?: unknown;
          logprobs?: { tokens?: unknown; token_logprobs?: unknown } | null;
          finish_reason?: unknown;
          stop_reason?: unknown;
        }
      | undefined;
    if (!choice) throw new EngineError(url, 'the response has no choices');
    const tokens = Array.isArray(choice.token_ids)
      ? choice.token_ids
      : Array.isArray(choice.logprobs?.tokens)
        ? choice.logprobs.tokens.map((t) =>
            typeof t === 'string' && t.startsWith('token_id:') ? Number(t.slice(9)) : Number.NaN,
          )
        : null;
    if (!tokens?.every((t) => Number.isInteger(t) && t >= 0))
      throw new EngineError(
        url,
        'the response carries no token ids (the engine must support return_token_ids or return_tokens_as_token_ids)',
      );
    const logprobs = choice.logprobs?.token_logprobs;
    if (
      !Array.isArray(logprobs) ||
      logprobs.length !== tokens.length ||
      !logprobs.every((x) => typeof x === 'number')
    )
      throw new EngineError(url, `the response has ${tokens.length} tokens but no matching token_logprobs`);
    if (tokens.length > maxTokens)
      throw new EngineError(
        url,
        `the engine returned ${tokens.length} tokens, more than the ${maxTokens} asked for`,
      );
    const finish =
      choice.finish_reason === 'length'
        ? 'length'
        : choice.finish_reason === 'stop'
          ? typeof choice.stop_reason === 'string'
            ? 'stop_string'
            : 'stop_token'
          : null;
    if (finish === null)
      throw new EngineError(url, `unknown finish_reason ${JSON.stringify(choice.finish_reason)}`);
    return { tokens: tokens as number[], logprobs: logprobs as number[], finish };
  }

  /** Asks the engine to load a checkpoint directory (SGLang's /update_weights_from_disk; akbe's server has it too). */
  async loadWeights(modelPath: string): Promise<void> {
    const r = (await this.fetchJson('/update_weights_from_disk', { model_path: modelPath })) as {
      success?: boolean;
      message?: string;
    };
    if (r?.success === false)
      throw new EngineError(this.base, `did not load ${modelPath}: ${r.message ?? 'no reason given'}`);
  }
}
