/**
 * The OpenAI-compatible server (`akbe policy serve --http`) serving the committed world base, and
 * the token-in/token-out client talking to it, directly and as svc.generate's external engine.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ExternalPolicy } from '../src/actors/services/policy/external-policy.js';
import {
  PolicyService,
  requestGenerate,
  StalePolicyVersionError,
} from '../src/actors/services/policy/policy-service.js';
import { saveCheckpoint } from '../src/gpu/checkpoint.js';
import { initParams, validateGPTConfig } from '../src/gpu/config.js';
import { PolicyHost } from '../src/gpu/policy-host.js';
import { CompletionsClient, EngineError } from '../src/serve/completions-client.js';
import { serveCheckpoint } from '../src/serve/policy-server.js';
import { loadTextCodec } from '../src/text/codec.js';
import { withNats } from './helpers/nats.js';
import { maxScoreDiff } from './helpers/score.js';

const BASE = new URL('../assets/base', import.meta.url).pathname;
const QUESTION = 'Where was the author born? Search up to 6 times.';

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: the tests read the server's JSON replies field by field
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

t.test(
  'completions: text and token-id prompts, logprobs equal to the scoring forward, validation',
  async (t) => {
    const served = await serveCheckpoint({ checkpoint: BASE, port: 0, maxChoices: 8 });
    t.teardown(() => served.close());
    const url = served.server.url;
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, 'binds loopback by default');
    const codec = await loadTextCodec(BASE);
    t.equal(codec.kind, 'world');

    const models = (await (await fetch(`${url}/v1/models`)).json()) as {
      data: Array<Record<string, unknown>>;
    };
    t.same(
      models.data.map((m) => [m.id, m.max_model_len]),
      [['base', 128]],
    );

    const promptIds = [1, ...codec.encode(QUESTION)];
    const ask = {
      model: 'base',
      prompt: promptIds,
      max_tokens: 40,
      seed: 11,
      stop: ['</search>', '</answer>'],
      logprobs: 0,
      return_token_ids: true,
    };
    const a = await post(`${url}/v1/completions`, ask);
    t.equal(a.status, 200);
    const c = a.json.choices[0];
    t.same(c.prompt_token_ids, promptIds);
    t.ok(c.token_ids.length > 0 && c.token_ids.length <= 40);
    t.equal(c.logprobs.token_logprobs.length, c.token_ids.length);
    t.equal(a.json.usage.completion_tokens, c.token_ids.length);
    // The sampled tokens' logprobs are the policy's at temperature 1: the teacher-forced scoring graph
    // (another ORT graph than the decoder's KV-cache one) gives the same numbers.
    const host = await PolicyHost.start({ checkpoint: BASE });
    t.teardown(() => host.close());
    const maxDiff = await maxScoreDiff(host, promptIds, c.token_ids, c.logprobs.token_logprobs);
    t.ok(maxDiff < 1e-4, `logprobs match the scoring forward (max |diff| ${maxDiff.toExponential(1)})`);
    // Text is the decoded ids, cut before the stop string unless asked to keep it.
    const full = codec.decode(c.token_ids, { skipSpecialTokens: true });
    if (c.finish_reason === 'stop' && typeof c.stop_reason === 'string') {
      t.equal(c.text, full.slice(0, full.indexOf(c.stop_reason)));
      const kept = await post(`${url}/v1/completions`, { ...ask, include_stop_str_in_output: true });
      t.equal(kept.json.choices[0].text, full, 'include_stop_str_in_output keeps it');
    } else t.equal(c.text, full);

    // The same seed gives the same sample; the text prompt (with <bos> written out) is the same prompt.
    const again = await post(`${url}/v1/completions`, { ...ask, prompt: `<bos> ${QUESTION}` });
    t.same(again.json.choices[0].token_ids, c.token_ids, 'text prompt, same seed, same tokens');
    const asIds = await post(`${url}/v1/completions`, { ...ask, return_tokens_as_token_ids: true, n: 2 });
    t.same(
      asIds.json.choices[0].logprobs.tokens,
      c.token_ids.map((id: number) => `token_id:${id}`),
      'return_tokens_as_token_ids',
    );
    t.equal(asIds.json.choices.length, 2, 'n = 2');

    // Bad requests are 4xx naming the field, and the server goes on serving.
    const cases: Array<[unknown, number, RegExp]> = [
      [{ max_tokens: 4 }, 400, /prompt: is required/],
      [{ prompt: [1, 604] }, 400, /prompt: token ids must be integers in \[0, 604\)/],
      [{ prompt: [] }, 400, /prompt: must be/],
      [{ prompt: 'x', stream: true }, 400, /stream: streaming is not supported/],
      [{ prompt: 'x', logprobs: 5 }, 400, /logprobs: akbe returns the sampled token's logprob only/],
      [{ prompt: 'x', temperature: -1 }, 400, /temperature: must be a number >= 0/],
      [{ prompt: 'x', top_p: 0 }, 400, /top_p/],
      [{ prompt: 'x', max_tokens: 1.5 }, 400, /max_tokens: must be an integer/],
      [{ prompt: 'x', presence_penalty: 0.5 }, 400, /penalties are not supported/],
      [{ prompt: 'x', n: 9 }, 400, /more than the 8 choices/],
      [{ prompt: promptIds, max_tokens: 128 }, 400, /more than the model's context of 128/],
      [{ prompt: 'x', model: 'gpt-4' }, 404, /model gpt-4 does not exist/],
      [[1, 2], 400, /must be a JSON object/],
      ['{"prompt": ', 400, /not valid JSON/],
    ];
    for (const [body, status, message] of cases) {
      const r = await post(`${url}/v1/completions`, body);
      t.equal(r.status, status, JSON.stringify(body));
      t.match(r.json.error.message, message);
    }
    t.equal((await post(`${url}/v1/completions`, `{"prompt": "${'a'.repeat(9 << 20)}"}`)).status, 413);
    t.equal((await fetch(`${url}/v1/completions`)).status, 405);
    t.equal((await fetch(`${url}/v1/chat`)).status, 404);
    t.equal(
      (await post(`${url}/update_weights_from_disk`, { model_path: BASE })).status,
      403,
      'off by default',
    );
    const last = await post(`${url}/v1/completions`, ask);
    t.same(last.json.choices[0].token_ids, c.token_ids, 'still serving after the bad requests');
  },
);

t.test('client: token-in/token-out, weight sync from disk, svc.generate over NATS', async (t) => {
  const served = await serveCheckpoint({
    checkpoint: BASE,
    port: 0,
    apiKey: 'k3y',
    allowWeightUpdates: true,
  });
  t.teardown(() => served.close());
  const codec = await loadTextCodec(BASE);
  const prompt = [1, ...codec.encode(QUESTION)];
  const req = {
    prompt,
    maxNewTokens: 30,
    seed: 5,
    temperature: 1,
    topP: 1,
    stopTokens: [2],
    stopStrings: ['</search>'],
  };

  await t.rejects(
    new CompletionsClient(served.server.url).generate(req),
    /HTTP 401: missing or wrong API key/,
  );
  // A web page's cross-site simple request (text/plain needs no preflight): even with the key a
  // page cannot know, the Origin alone is refused, before the body is read.
  const forged = await fetch(`${served.server.url}/update_weights_from_disk`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain', origin: 'http://evil.example', authorization: 'Bearer k3y' },
    body: JSON.stringify({ model_path: BASE }),
  });
  t.equal(forged.status, 403, 'a cross-site POST to the weight-update endpoint is refused');
  const client = new CompletionsClient(`${served.server.url}/v1/`, { apiKey: 'k3y' });
  const r = await client.generate(req);
  const raw = await post(
    `${served.server.url}/v1/completions`,
    {
      prompt,
      max_tokens: 30,
      seed: 5,
      stop: ['</search>'],
      stop_token_ids: [2],
      logprobs: 0,
      return_token_ids: true,
    },
    { authorization: 'Bearer k3y' },
  );
  t.same(r.tokens, raw.json.choices[0].token_ids, 'the ids the server sampled');
  t.same(r.logprobs, raw.json.choices[0].logprobs.token_logprobs);
  const expectFinish =
    raw.json.choices[0].finish_reason === 'length'
      ? 'length'
      : typeof raw.json.choices[0].stop_reason === 'string'
        ? 'stop_string'
        : 'stop_token';
  t.equal(r.finish, expectFinish);
  // max tokens are clamped to the engine's context (max_model_len from /v1/models): unclamped, the
  // server would answer 400 (prompt + max_tokens over the context).
  const long = await client.generate({ ...req, maxNewTokens: 1000, stopStrings: [] });
  t.ok(long.tokens.length <= 128 - prompt.length, 'clamped to the context');
  t.throws(() => new CompletionsClient('127.0.0.1:1'), EngineError, 'a URL without a scheme');

  // Weight sync: a second checkpoint (same shape, other weights) is loaded by path.
  const dir = await mkdtemp(join(tmpdir(), 'akbe-serve-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const cfg = validateGPTConfig(JSON.parse(await readFile(join(BASE, 'config.json'), 'utf8')));
  await saveCheckpoint(join(dir, 'v1'), { config: cfg, params: initParams(cfg, 3) });

  // svc.generate over NATS, answered by the external engine.
  const nats = await withNats(t);
  const policy = await ExternalPolicy.connect({
    client,
    sync: 'disk',
    checkpointDir: async (v) => join(dir, `v${v}`),
  });
  t.equal(policy.context, 128);
  const service = new PolicyService(nats.nc, 'ext', policy);
  t.teardown(() => service.stop());
  const call = req;
  const v0 = await requestGenerate(nats.nc, 'ext', { ...call, policyVersion: 0 });
  t.same(v0.tokens, r.tokens, 'version 0 over NATS: the same sample');
  t.equal(v0.version, 0);
  const v1 = await requestGenerate(nats.nc, 'ext', { ...call, policyVersion: 1 });
  t.equal(v1.version, 1, 'the engine was moved to v1');
  t.notSame(v1.logprobs, v0.logprobs, 'other weights, other logprobs');
  const host = await PolicyHost.start({ checkpoint: join(dir, 'v1') });
  t.teardown(() => host.close());
  const diff = await maxScoreDiff(host, prompt, v1.tokens, v1.logprobs);
  t.ok(diff < 1e-4, `v1 logprobs are the v1 checkpoint's (max |diff| ${diff.toExponential(1)})`);
  await t.rejects(policy.ensure(0), StalePolicyVersionError, 'no going back');
  await t.rejects(
    requestGenerate(nats.nc, 'ext', { ...call, policyVersion: 2 }),
    /model_path .*v2/,
    'a version with no checkpoint fails with the engine reason',
  );

  const frozen = await ExternalPolicy.connect({ client, sync: 'none', version: 1 });
  await t.rejects(frozen.ensure(2), /has no weight sync/);
});
