/**
 * The body of Search-R1's `POST /retrieve`, read as its server reads it. There the body is a
 * pydantic (v2) model behind FastAPI (search_r1/search/retrieval_server.py):
 *
 *   class QueryRequest(BaseModel):
 *       queries: List[str]
 *       topk: Optional[int] = None
 *       return_scores: bool = False
 *
 * so the values pydantic's lax mode accepts are accepted here too (`"topk": "3"`, `3.0`, `true`;
 * `"return_scores": 1`, `"yes"`, `"off"`), unknown keys are ignored, and a bad body is answered
 * with FastAPI's 422 shape, every field's error at once:
 *
 *   {"detail": [{"type": "int_parsing", "loc": ["body", "topk"],
 *                "msg": "Input should be a valid integer, unable to parse string as an integer",
 *                "input": "three"}]}
 *
 * akbe's own limits (how many queries, how long, how many passages) are reported in the same
 * shape, with the messages pydantic gives a constrained field.
 */

/** One entry of FastAPI's `detail` list. */
export interface FastApiError {
  type: string;
  loc: Array<string | number>;
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

export interface RetrieveLimits {
  /** Queries per request (Search-R1's GRPO scripts send up to 512 x 5 = 2,560). */
  maxQueries: number;
  /** Characters per query. */
  maxQueryChars: number;
  /** Passages per query. */
  maxTopk: number;
}

export const DEFAULT_RETRIEVE_LIMITS: RetrieveLimits = {
  maxQueries: 8192,
  maxQueryChars: 8192,
  maxTopk: 100,
};

export interface RetrieveRequest {
  queries: string[];
  /** null: the server's default (Search-R1 treats 0 and a missing topk alike). */
  topk: number | null;
  returnScores: boolean;
}

export type Parsed = { ok: true; request: RetrieveRequest } | { ok: false; errors: FastApiError[] };

const TRUE = new Set(['1', 'on', 't', 'true', 'y', 'yes']);
const FALSE = new Set(['0', 'off', 'f', 'false', 'n', 'no']);

/** pydantic's lax `int`: an integer, an integral float, a bool, or a string holding one. */
function laxInt(v: unknown, loc: FastApiError['loc']): number | FastApiError {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') {
    if (Number.isInteger(v)) return v;
    if (Number.isFinite(v))
      return issue(
        'int_from_float',
        loc,
        'Input should be a valid integer, got a number with a fractional part',
        v,
      );
    return issue('finite_number', loc, 'Input should be a finite number', v);
  }
  if (typeof v === 'string') {
    const s = v.trim().replace(/(\d)_(?=\d)/g, '$1');
    if (/^[+-]?\d+(\.0*)?$/.test(s)) return Number.parseInt(s, 10);
    return issue(
      'int_parsing',
      loc,
      'Input should be a valid integer, unable to parse string as an integer',
      v,
    );
  }
  return issue('int_type', loc, 'Input should be a valid integer', v);
}

/** pydantic's lax `bool`: a bool, 0 or 1, or one of its words in any case. */
function laxBool(v: unknown, loc: FastApiError['loc']): boolean | FastApiError {
  if (typeof v === 'boolean') return v;
  if (v === 0 || v === 1) return v === 1;
  if (typeof v === 'string') {
    const s = v.trim().toLowerCase();
    if (TRUE.has(s)) return true;
    if (FALSE.has(s)) return false;
    return issue('bool_parsing', loc, 'Input should be a valid boolean, unable to interpret input', v);
  }
  return issue('bool_type', loc, 'Input should be a valid boolean', v);
}

/** One entry of the 422 detail, as pydantic words it. */
function issue(
  type: string,
  loc: FastApiError['loc'],
  msg: string,
  input: unknown,
  ctx?: Record<string, unknown>,
): FastApiError {
  return ctx ? { type, loc, msg, input, ctx } : { type, loc, msg, input };
}

const isError = (v: unknown): v is FastApiError =>
  typeof v === 'object' && v !== null && 'type' in v && 'loc' in v && 'msg' in v;

/** Reads a decoded JSON body as Search-R1's server would, then checks akbe's limits. */
export function parseRetrieveBody(body: unknown, limits: RetrieveLimits = DEFAULT_RETRIEVE_LIMITS): Parsed {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return {
      ok: false,
      errors: [
        issue(
          'model_attributes_type',
          ['body'],
          'Input should be a valid dictionary or object to extract fields from',
          body,
        ),
      ],
    };
  const raw = body as Record<string, unknown>;
  const errors: FastApiError[] = [];
  const queries = parseQueries(raw, limits, errors);
  const topk = parseTopk(raw, limits, errors);
  let returnScores = false;
  if (raw.return_scores !== undefined) {
    const b = laxBool(raw.return_scores, ['body', 'return_scores']);
    if (isError(b)) errors.push(b);
    else returnScores = b;
  }
  return errors.length ? { ok: false, errors } : { ok: true, request: { queries, topk, returnScores } };
}

/** `queries`: present, a list of strings within the limits; an error is appended to `errors`. */
function parseQueries(
  raw: Record<string, unknown>,
  limits: RetrieveLimits,
  errors: FastApiError[],
): string[] {
  if (!('queries' in raw)) {
    errors.push(issue('missing', ['body', 'queries'], 'Field required', raw));
    return [];
  }
  if (!Array.isArray(raw.queries)) {
    errors.push(issue('list_type', ['body', 'queries'], 'Input should be a valid list', raw.queries));
    return [];
  }
  const queries = raw.queries as string[];
  queries.forEach((q, i) => {
    const loc = ['body', 'queries', i];
    if (typeof q !== 'string') errors.push(issue('string_type', loc, 'Input should be a valid string', q));
    else if (q.length > limits.maxQueryChars)
      errors.push(
        issue(
          'string_too_long',
          loc,
          `String should have at most ${limits.maxQueryChars} characters`,
          `${q.slice(0, 80)}...`,
          {
            max_length: limits.maxQueryChars,
          },
        ),
      );
  });
  if (queries.length > limits.maxQueries)
    errors.push(
      issue(
        'too_long',
        ['body', 'queries'],
        `List should have at most ${limits.maxQueries} items after validation, not ${queries.length}`,
        `[${queries.length} queries]`,
        { field_type: 'List', max_length: limits.maxQueries, actual_length: queries.length },
      ),
    );
  return queries;
}

/** `topk`: absent, null or 0 is the default (null); else an integer in [0, maxTopk]. */
function parseTopk(
  raw: Record<string, unknown>,
  limits: RetrieveLimits,
  errors: FastApiError[],
): number | null {
  if (raw.topk === undefined || raw.topk === null) return null;
  const k = laxInt(raw.topk, ['body', 'topk']);
  if (isError(k)) errors.push(k);
  else if (k < 0)
    // Search-R1 would hand a negative k to faiss and fail with a 500; say why instead.
    errors.push(
      issue('greater_than_equal', ['body', 'topk'], 'Input should be greater than or equal to 0', raw.topk, {
        ge: 0,
      }),
    );
  else if (k > limits.maxTopk)
    errors.push(
      issue(
        'less_than_equal',
        ['body', 'topk'],
        `Input should be less than or equal to ${limits.maxTopk}`,
        raw.topk,
        {
          le: limits.maxTopk,
        },
      ),
    );
  else return k === 0 ? null : k; // `if not request.topk`: 0 means the default there
  return null;
}
