/**
 * `akbe train`'s before/after evaluation (every other training test sets evalQuestions: 0): one
 * tiny step with `evalQuestions: 2` on dev. The `eval before (v0)` line comes before the first
 * step and `eval after (v1)` after the last; each line's EM / TC / TP / no-tool EM equal an
 * independent evaluation of that version's checkpoint by `akbe eval`'s in-process path
 * (src/jobs/eval-run.ts: the policy in this process, not through the run's policy service; the
 * search brute force over the lexical embedding, not the run's hnswlib index; the same limits);
 * the before/after table on stdout carries the same numbers.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import t from 'tap';
import { main } from '../src/cli/main.js';
import { runEval } from '../src/jobs/eval-run.js';
import { KILL_AT_ENV } from '../src/util/kill-point.js';
import type { EvalReport } from '../src/world/eval.js';
import { runCli } from './helpers/cli.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, TINY_TRAIN } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

// The committed base policy answers some dev questions right and searches on some: the numbers
// compared below are not all zeros (the tiny policy's are).
const fx = await baseRunFixture();
const nats = await withNats(t);
const dir = mkdtempSync(join(tmpdir(), 'akbe-train-eval-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** The line's numbers as printed: EM, TC, TP ('-' when no tool call), no-tool EM, questions. */
const N = 6;
const LINE =
  /^eval (before|after) \(v(\d+)\) dev: EM (\S+) TC (\S+) TP (\S+) no-tool EM (\S+) \((\d+) questions, \d+s\)$/;

/** The eval lines of a train job's stderr, parsed. */
const evalLines = (text: string) =>
  text
    .split('\n')
    .map((l) => LINE.exec(l))
    .filter((m) => m !== null);

/** `akbe eval`'s numbers for a checkpoint, printed the way the train job prints them. */
async function reference(checkpoint: string): Promise<string[]> {
  const json = join(dir, `ref-${Math.random().toString(36).slice(2)}.json`);
  await runEval({
    checkpoint,
    worldDir: fx.worldDir,
    split: 'dev',
    temperature: 0,
    seed: 0,
    samples: 1,
    limit: N,
    // The run's rollout limits: both evaluations roll out through the rollout machine.
    maxToolCalls: TINY_TRAIN.maxToolCalls,
    maxResponseTokens: TINY_TRAIN.maxResponseTokens,
    batch: 8,
    threads: 1,
    json,
    err: new Writable({ write: (_c, _e, cb) => cb() }),
  });
  const { report } = JSON.parse(readFileSync(json, 'utf8')) as { report: EvalReport };
  const all = report.groups.find((g) => g.group === 'all')!;
  const w = all.withTool;
  return [
    w.em.toFixed(3),
    w.tc.toFixed(2),
    w.tp === null ? '-' : w.tp.toFixed(3),
    all.noTool.em.toFixed(3),
    String(all.questions),
  ];
}

t.test('akbe train evaluates dev before and after, on versions 0 and 1', async (t) => {
  const cfg = join(dir, 'eval.json');
  const train = { ...TINY_TRAIN, steps: 1 };
  writeFileSync(
    cfg,
    JSON.stringify({
      ...train,
      world: fx.worldDir,
      policy: fx.policyDir,
      topK: 3,
      evalQuestions: N,
      evalSplits: ['dev'],
    }),
  );
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (c) => (o += c));
  err.on('data', (c) => (e += c));
  const home = join(dir, 'home');
  const code = await main(
    ['train', '--config', cfg, '--run-id', 'ev', '--nats', nats.server.url, '--home', home, '--threads', '1'],
    out,
    err,
  );
  t.equal(code, 0, e);

  const errLines = e.split('\n');
  const evals = errLines.map((l) => LINE.exec(l)).filter((m) => m !== null);
  t.same(
    evals.map((m) => [m[1], m[2], m[7]]),
    [
      ['before', '0', String(N)],
      ['after', '1', String(N)],
    ],
    `one line before (v0) and one after (v1), ${N} questions each`,
  );
  const idx = (re: RegExp) => errLines.findIndex((l) => re.test(l));
  const outLines = o.split('\n');
  const stepLines = outLines.filter((l) => /^step 0\b/.test(l));
  t.equal(stepLines.length, 1, `one step line:\n${o}`);
  t.ok(idx(/^eval before/) < idx(/^eval after/), 'before, then after');
  t.ok(idx(/^eval after/) < idx(/^train: run ev 1 steps, policy v1/), 'after the last step');

  const before = await reference(fx.policyDir);
  const after = await reference(join(home, 'runs', 'ev', 'checkpoints', 'v1'));
  t.same(evals[0]?.slice(3, 8), before, 'before: the base checkpoint, evaluated independently');
  t.same(evals[1]?.slice(3, 8), after, 'after: checkpoint v1, evaluated independently');

  // The table: header, then `dev 2 EMb EMa TCb TCa TPb TPa ntb->nta`.
  const header = outLines.findIndex((l) => /^split\s+n\s+EM before/.test(l));
  t.ok(header >= 0, `the before/after table:\n${o}`);
  t.same(outLines[header + 1]?.trim().split(/\s+/), [
    'dev',
    String(N),
    before[0],
    after[0],
    before[1],
    after[1],
    before[2],
    after[2],
    `${before[3]}->${after[3]}`,
  ]);
});

t.test('a resumed run reads its before-evaluation back from the log instead of re-running it', async (t) => {
  const cfg = join(dir, 'resume.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      ...TINY_TRAIN,
      steps: 2,
      world: fx.worldDir,
      policy: fx.policyDir,
      topK: 3,
      evalQuestions: N,
      evalSplits: ['dev'],
    }),
  );
  const home = join(dir, 'home-resume');
  const args = ['--run-id', 'evr', '--nats', nats.server.url, '--home', home, '--threads', '1'];
  // The first start evaluates v0, trains step 0 and dies (SIGKILL) during step 1's update.
  const first = startCli(['train', '--config', cfg, ...args], { [KILL_AT_ENV]: 'train:1' });
  t.equal(await first.exited, null, 'killed at train:1');
  const firstBefore = evalLines(first.output());
  t.same(
    firstBefore.map((m) => [m[1], m[2]]),
    [['before', '0']],
    'the first start evaluated v0',
  );
  const { code, out: o, err: e } = await runCli('train', '--resume', ...args);
  t.equal(code, 0, e);
  const evals = evalLines(e);
  t.same(
    evals.map((m) => [m[1], m[2]]),
    [['after', '2']],
    'the resume evaluates only after (v2): no second "before" at the resume version',
  );
  const row = o.split('\n').find((l) => /^dev\s/.test(l));
  const [em, tc] = firstBefore[0].slice(3, 5);
  t.match(
    row,
    new RegExp(`^dev\\s+${N}\\s+${em}\\s+\\S+\\s+${tc}\\s`),
    `the table's before column is v0's: ${row}`,
  );
});
