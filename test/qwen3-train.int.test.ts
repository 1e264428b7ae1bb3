/**
 * Issue 14 item 4's acceptance: `akbe train` with `policy:` pointing at a Llama-family checkpoint
 * (a tiny random Qwen3 carrying the real Qwen3 tokenizer files) runs end to end on the synthetic
 * world through NATS, in the Search-R1 text environment, and `akbe replay` audits it clean; its
 * before/after dev evaluation runs in the same environment and equals `akbe eval` of the checkpoints.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { unpack } from '../src/actors/nats/wire.js';
import { EventStore } from '../src/events/store.js';
import { serviceSubject } from '../src/events/subjects.js';
import { architecture, parsePolicyConfig } from '../src/gpu/architecture.js';
import { saveCheckpoint } from '../src/gpu/checkpoint.js';
import { runEval } from '../src/jobs/eval-run.js';
import { serveCheckpoint } from '../src/serve/policy-server.js';
import type { EvalReport, EvalRollout } from '../src/world/eval.js';
import { readQuestions } from '../src/world/files.js';
import { runCli } from './helpers/cli.js';
import { QWEN3_TOKENIZER_DIR, qwen3Tokenizer } from './helpers/hf-files.js';
import { withNats } from './helpers/nats.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

/** Dev questions of the before/after evaluation, and the line `akbe train` prints for each. */
const EVAL_N = 2;
const EVAL_LINE =
  /^eval (before|after) \(v(\d+)\) dev: EM (\S+) TC (\S+) TP (\S+) no-tool EM (\S+) \((\d+) questions, \d+s\)$/;

/** A tiny Qwen3 (GQA, head_dim != hidden / heads, tied head) over the real 151,669-id vocabulary. */
const TINY_QWEN3 = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  vocab_size: 151669,
  hidden_size: 8,
  intermediate_size: 16,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  hidden_act: 'silu',
  max_position_embeddings: 160,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  tie_word_embeddings: true,
  bos_token_id: 151643,
  eos_token_id: 151645,
};

t.test('akbe train on a tiny random Qwen3 with the real Qwen3 tokenizer, audited clean', async (t) => {
  const fx = await tinyRunFixture();
  const home = mkdtempSync(join(tmpdir(), 'akbe-qwen3-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const policy = join(home, 'qwen3-tiny');
  const cfg = parsePolicyConfig(TINY_QWEN3);
  await saveCheckpoint(policy, { config: cfg, params: architecture(cfg).initParams(3) });
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(join(QWEN3_TOKENIZER_DIR, f), join(policy, f));
  const config = join(home, 'qwen3.json');
  writeFileSync(
    config,
    JSON.stringify({
      ...TINY_TRAIN,
      maxResponseTokens: 24,
      world: fx.worldDir,
      policy,
      evalQuestions: EVAL_N,
      evalSplits: ['dev'],
    }),
  );
  const nats = await withNats(t);
  // A copy of every svc.generate request (the service answers in a queue group; this plain
  // subscription only listens), to see what the evaluation asked the policy.
  const generateCalls: Array<{ prompt: number[]; stopStrings?: string[] }> = [];
  const sub = nats.nc.subscribe(serviceSubject('qwen3', 'generate'), {
    callback: (_e, m) => {
      const r = unpack<{ prompt: ArrayLike<number>; stopStrings?: string[] }>(m.data);
      generateCalls.push({ prompt: Array.from(r.prompt), stopStrings: r.stopStrings });
    },
  });
  t.teardown(() => sub.unsubscribe());
  const flags = ['--nats', nats.server.url, '--home', home];
  const train = await runCli('train', '--config', config, '--run-id', 'qwen3', '--threads', '1', ...flags);
  t.equal(train.code, 0, train.err.slice(-2000));

  const store = await EventStore.open(nats.nc);
  const tok = await qwen3Tokenizer();
  const questions = new Set((await readQuestions(fx.worldDir, 'train')).map((q) => q.question));
  let rollouts = 0;
  let steps = 0;
  for await (const { event: e } of store.replay('qwen3')) {
    if (e.type === 'learner.step') steps++;
    if (e.type !== 'rollout.completed') continue;
    rollouts++;
    // The world's question, in Search-R1's instruction, in Qwen3's chat format.
    const prompt = tok.decode([...e.data.promptTokenIds]);
    t.match(prompt, /^<\|im_start\|>user\nAnswer the given question/);
    t.ok(prompt.endsWith('<|im_end|>\n<|im_start|>assistant\n'), 'ends with the assistant header');
    const q = /Question: (.*)\n<\|im_end\|>/.exec(prompt)?.[1];
    t.ok(q !== undefined && questions.has(q), `a train question of the world: ${q}`);
    // Token-in/token-out: the recorded turn texts are the decoded generated ids.
    const generated = e.data.segments?.filter((s) => s.kind === 'generated').map((s) => s.text) ?? [];
    t.ok(generated.length > 0);
    t.ok(
      [...e.data.responseTokenIds].every((id) => id >= 0 && id < 151669),
      'ids in the Qwen3 vocabulary',
    );
  }
  t.equal(rollouts, 2 * 2 * 4, '2 steps x 2 questions x (2 + 2) rollouts');
  t.equal(steps, 2);

  const replay = await runCli('replay', '--run', 'qwen3', ...flags);
  t.equal(replay.code, 0, replay.out + replay.err);
  t.match(replay.out, /replay of run qwen3: clean/);

  // A published version is a whole Hugging Face checkpoint (weights + tokenizer files): an engine
  // loads it as it is. Here akbe's own server does, and answers a text prompt.
  const v2 = join(home, 'runs', 'qwen3', 'checkpoints', 'v2');
  t.ok(existsSync(join(v2, 'tokenizer_config.json')), 'tokenizer files beside the weights');
  const served = await serveCheckpoint({ checkpoint: v2, port: 0, threads: 1 });
  t.teardown(() => served.close());
  const res = await fetch(`${served.server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Who wrote Hamlet?', max_tokens: 4, seed: 1, return_token_ids: true }),
  });
  const body = (await res.json()) as { choices: Array<{ token_ids: number[]; prompt_token_ids: number[] }> };
  t.equal(res.status, 200);
  t.same(
    body.choices[0].prompt_token_ids,
    tok.encode('Who wrote Hamlet?'),
    'the Qwen3 tokenizer encoded the prompt',
  );
  t.ok(body.choices[0].token_ids.length > 0);

  // The before/after dev evaluation rolls the Hugging Face policy out in the run's Search-R1
  // environment, and its figures equal an independent `akbe eval` of the same checkpoints (the
  // policy in process, the world's brute-force lexical search, the run's limits).
  const lines = train.err
    .split('\n')
    .map((l) => EVAL_LINE.exec(l))
    .filter((m) => m !== null);
  t.same(
    lines.map((m) => [m[1], m[2], m[7]]),
    [
      ['before', '0', String(EVAL_N)],
      ['after', '2', String(EVAL_N)],
    ],
    train.err.slice(-2000),
  );
  const reference = async (checkpoint: string) => {
    const json = join(home, `ref-${lines.length}-${checkpoint.length}.json`);
    await runEval({
      checkpoint,
      worldDir: fx.worldDir,
      split: 'dev',
      temperature: 0,
      seed: 0,
      samples: 1,
      limit: EVAL_N,
      maxToolCalls: TINY_TRAIN.maxToolCalls,
      maxResponseTokens: 24,
      batch: 8,
      threads: 1,
      json,
      err: new Writable({ write: (_c, _e, cb) => cb() }),
    });
    const out = JSON.parse(readFileSync(json, 'utf8')) as { report: EvalReport; rollouts: EvalRollout[] };
    const all = out.report.groups.find((g) => g.group === 'all')!;
    const w = all.withTool;
    const figures = [w.em, w.tc, w.tp, all.noTool.em];
    return { figures, rollouts: out.rollouts };
  };
  const printed = (m: RegExpExecArray) => [m[3], m[4], m[5], m[6]].map((x) => (x === '-' ? null : Number(x)));
  const round = (xs: Array<number | null>) =>
    xs.map((x, i) => (x === null ? null : +x.toFixed(i === 1 ? 2 : 3)));
  const before = await reference(policy);
  const after = await reference(v2);
  t.same(printed(lines[0]), round(before.figures), 'before: the base, evaluated by akbe eval');
  t.same(printed(lines[1]), round(after.figures), 'after: v2, evaluated by akbe eval');
  // The run's evaluation asked its policy for the dev questions in Search-R1's Qwen3 chat prompt,
  // stopping at the tags as strings (first turns: the prompt ends with the assistant header).
  const dev = (await readQuestions(fx.worldDir, 'dev')).slice(0, EVAL_N).map((q) => q.question);
  const asked = new Set<string>();
  for (const c of generateCalls) {
    const text = tok.decode(c.prompt);
    const q =
      /^<\|im_start\|>user\nAnswer the given question[\s\S]*Question: (.*)\n<\|im_end\|>\n<\|im_start\|>assistant\n$/.exec(
        text,
      )?.[1];
    if (q === undefined || !dev.includes(q)) continue;
    asked.add(q);
    t.same(c.stopStrings, ['</search>', '</answer>'], 'tags are stop strings');
  }
  t.same([...asked].sort(), [...dev].sort(), 'every evaluated dev question, in the chat prompt');
  // akbe eval rolled out both paths of each question in the Qwen3 environment.
  t.equal(after.rollouts.length, 2 * EVAL_N, 'both paths of each question');
  t.ok(after.rollouts.every((r) => r.text.length > 0));
});
