/**
 * The OpenAI completions request (`POST /v1/completions`) as akbe's server accepts it: parsed and
 * validated field by field, each problem a 400 naming the field. Besides OpenAI's fields it takes
 * vLLM's token-level extensions, so that RL clients written for vLLM work unchanged:
 *
 *   prompt                       text, token ids, or a list of either (one choice set per prompt)
 *   max_tokens, temperature, top_p, n, seed, stop, logprobs (0: the sampled token's logprob)
 *   stop_token_ids, ignore_eos, include_stop_str_in_output, skip_special_tokens   (vLLM)
 *   return_token_ids             choices carry `token_ids` and `prompt_token_ids` (vLLM)
 *   return_tokens_as_token_ids   logprobs.tokens are `token_id:<id>` strings (vLLM)
 *
 * Fields that would change the distribution in ways akbe's sampler does not implement (penalties,
 * logit_bias, top_k, best_of, echo, suffix, streaming, top-k alternatives) are refused rather than
 * ignored: an RL client must never get samples from a policy other than the one it asked for.
 * Unknown fields are ignored, as OpenAI's and vLLM's servers do (SDKs send `user`, …).
 */

export class CompletionRequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The request field at fault. */
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'CompletionRequestError';
  }
}

export interface CompletionRequest {
  model: string | null;
  /** One entry per prompt: text, or token ids. */
  prompts: Array<string | number[]>;
  maxTokens: number;
  temperature: number;
  topP: number;
  n: number;
  /** Seed of choice i is (seed + i) mod 2^32; null = a fresh random seed per request. */
  seed: number | null;
  stop: string[];
  stopTokenIds: number[];
  ignoreEos: boolean;
  /** null = no logprobs in the response; 0 = the sampled tokens' logprobs. */
  logprobs: number | null;
  includeStopStrInOutput: boolean;
  skipSpecialTokens: boolean;
  returnTokenIds: boolean;
  returnTokensAsTokenIds: boolean;
}

export interface RequestLimits {
  vocabSize: number;
  /** Most choices per request (n × prompts). */
  maxChoices: number;
}

const bad = (param: string, message: string) =>
  new CompletionRequestError(400, `${param}: ${message}`, param);

function optBool(body: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw bad(key, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

function optNumber(
  body: Record<string, unknown>,
  key: string,
  fallback: number,
  check: (x: number) => boolean,
  rule: string,
): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || !check(v))
    throw bad(key, `must be ${rule}, got ${JSON.stringify(v)}`);
  return v;
}

const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x);

function tokenIds(v: unknown[], param: string, vocabSize: number): number[] {
  for (const id of v)
    if (!isInt(id) || id < 0 || id >= vocabSize)
      throw bad(param, `token ids must be integers in [0, ${vocabSize}), got ${JSON.stringify(id)}`);
  return v as number[];
}

function parsePrompts(v: unknown, vocabSize: number): Array<string | number[]> {
  const rule = 'a string, a list of token ids, or a list of strings / token-id lists';
  if (typeof v === 'string') return [v];
  if (!Array.isArray(v) || v.length === 0) throw bad('prompt', `must be ${rule}`);
  if (v.every((x) => typeof x === 'number')) return [tokenIds(v, 'prompt', vocabSize)];
  return v.map((p, i) => {
    if (typeof p === 'string') return p;
    if (Array.isArray(p) && p.length > 0) return tokenIds(p, `prompt[${i}]`, vocabSize);
    throw bad('prompt', `must be ${rule}; entry ${i} is ${JSON.stringify(p)}`);
  });
}

/** Fields that change sampling in ways this server does not implement: refused when set. */
const REFUSED: Array<[string, (v: unknown) => boolean, string]> = [
  ['stream', (v) => v === true, 'streaming is not supported; send stream: false'],
  ['echo', (v) => v === true, 'echo is not supported'],
  ['suffix', (v) => typeof v === 'string' && v !== '', 'suffix (insertion) is not supported'],
  ['presence_penalty', (v) => typeof v === 'number' && v !== 0, 'penalties are not supported'],
  ['frequency_penalty', (v) => typeof v === 'number' && v !== 0, 'penalties are not supported'],
  ['repetition_penalty', (v) => typeof v === 'number' && v !== 1, 'penalties are not supported'],
  [
    'logit_bias',
    (v) => v !== null && typeof v === 'object' && Object.keys(v).length > 0,
    'logit_bias is not supported',
  ],
  ['top_k', (v) => typeof v === 'number' && v !== -1 && v !== 0, 'top_k is not supported (use top_p)'],
  ['min_p', (v) => typeof v === 'number' && v !== 0, 'min_p is not supported (use top_p)'],
];

export function parseCompletionRequest(raw: unknown, limits: RequestLimits): CompletionRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new CompletionRequestError(400, 'the request body must be a JSON object');
  const body = raw as Record<string, unknown>;
  for (const [key, isSet, why] of REFUSED) if (isSet(body[key])) throw bad(key, why);
  if (body.model !== undefined && body.model !== null && typeof body.model !== 'string')
    throw bad('model', 'must be a string');
  if (body.prompt === undefined) throw bad('prompt', 'is required');
  const prompts = parsePrompts(body.prompt, limits.vocabSize);
  const n = optNumber(body, 'n', 1, (x) => isInt(x) && x >= 1, 'an integer >= 1');
  const bestOf = body.best_of;
  if (bestOf !== undefined && bestOf !== null && bestOf !== n)
    throw bad('best_of', 'is not supported (leave it unset or equal to n)');
  if (n * prompts.length > limits.maxChoices)
    throw bad(
      'n',
      `n × prompts is ${n * prompts.length}, more than the ${limits.maxChoices} choices allowed`,
    );
  let stop: string[] = [];
  if (typeof body.stop === 'string') stop = [body.stop];
  else if (Array.isArray(body.stop)) {
    if (!body.stop.every((s) => typeof s === 'string' && s !== ''))
      throw bad('stop', 'must be a non-empty string or a list of non-empty strings');
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null) throw bad('stop', 'must be a string or a list');
  if (stop.length > 16) throw bad('stop', 'at most 16 stop strings');
  let stopTokenIds: number[] = [];
  if (Array.isArray(body.stop_token_ids))
    stopTokenIds = tokenIds(body.stop_token_ids, 'stop_token_ids', limits.vocabSize);
  else if (body.stop_token_ids !== undefined && body.stop_token_ids !== null)
    throw bad('stop_token_ids', 'must be a list of token ids');
  let logprobs: number | null = null;
  if (body.logprobs !== undefined && body.logprobs !== null && body.logprobs !== false) {
    if (body.logprobs !== 0 && body.logprobs !== true)
      throw bad(
        'logprobs',
        `akbe returns the sampled token's logprob only: send logprobs: 0 (got ${JSON.stringify(body.logprobs)})`,
      );
    logprobs = 0;
  }
  return {
    model: (body.model as string | undefined) ?? null,
    prompts,
    maxTokens: optNumber(body, 'max_tokens', 16, (x) => isInt(x) && x >= 1, 'an integer >= 1'),
    temperature: optNumber(body, 'temperature', 1, (x) => x >= 0, 'a number >= 0'),
    topP: optNumber(body, 'top_p', 1, (x) => x > 0 && x <= 1, 'a number in (0, 1]'),
    n,
    seed:
      body.seed === undefined || body.seed === null
        ? null
        : optNumber(body, 'seed', 0, (x) => isInt(x) && x >= 0 && x <= 0xffffffff, 'an integer in [0, 2^32)'),
    stop,
    stopTokenIds,
    ignoreEos: optBool(body, 'ignore_eos', false),
    logprobs,
    includeStopStrInOutput: optBool(body, 'include_stop_str_in_output', false),
    skipSpecialTokens: optBool(body, 'skip_special_tokens', true),
    returnTokenIds: optBool(body, 'return_token_ids', false),
    returnTokensAsTokenIds: optBool(body, 'return_tokens_as_token_ids', false),
  };
}
