/**
 * `akbe train`'s config file and step line, and the fact -> event mapping: no NATS, no ORT.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { factToEvent } from '../src/actors/log/fact-events.js';
import { formatStepLine } from '../src/actors/orchestrator/orchestrator.js';
import { runSetup } from '../src/actors/orchestrator/run-setup.js';
import { runSpecOf } from '../src/actors/roles/roles.js';
import { ConfigFileError, parseJobConfig, runEvalSettings } from '../src/cli/commands/train-job.js';
import { createEvent, validateEvent } from '../src/events/catalog.js';
import { ManualClock } from '../src/events/clock.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { effectiveLambda } from '../src/rl/losses.js';

t.test('configs/default.yaml and configs/tiny.yaml are valid and fill every hyperparameter', async (t) => {
  const d = await parseJobConfig(readFileSync('configs/default.yaml', 'utf8'), 'configs/default.yaml');
  t.same(Object.keys(d.train).sort(), Object.keys(DEFAULT_TRAIN_CONFIG).sort());
  t.equal(d.train.lambda, 'auto', "issue 24: the appendix-B rule is the configs' default");
  t.equal(effectiveLambda(d.train), 0.1, '0.8 / G_wt at G_wt = 8');
  const h = await parseJobConfig(readFileSync('configs/hard.yaml', 'utf8'), 'configs/hard.yaml');
  t.equal(h.train.lambda, 'auto');
  t.same([d.train.dualClip, d.train.logRatioClamp, d.train.lossAgg], [3, 20, 'token-mean']);
  t.match(d.world, /\.akbe\/world$/);
  const tiny = await parseJobConfig(readFileSync('configs/tiny.yaml', 'utf8'), 'configs/tiny.yaml', {
    steps: 5,
  });
  t.equal(tiny.train.steps, 5, 'flags override the file');
  t.equal(tiny.train.gWithTool, 2);
});

t.test('a bad config names the file and the key', async (t) => {
  const bad = async (text: string, file = 'x.yaml') => {
    try {
      await parseJobConfig(text, file);
    } catch (err) {
      t.type(err, ConfigFileError);
      return err as ConfigFileError;
    }
    throw new Error('no error');
  };
  const e1 = await bad('lambda: -1\n');
  t.equal(e1.key, 'lambda');
  t.match(e1.message, /^x\.yaml: config\.lambda must be a number >= 0/);
  t.equal((await bad('lamda: 0.1\n')).key, 'lamda', 'an unknown key is named');
  t.equal((await bad('evalQuestions: -2\n')).key, 'evalQuestions');
  t.match((await bad('{', 'c.json')).message, /^c\.json: not valid JSON/);
  t.equal((await bad('evalSplits: [valid]\n')).key, 'evalSplits');
  const keep1 = await bad('keepCheckpoints: 1\n');
  t.equal(keep1.key, 'keepCheckpoints');
  t.match(
    keep1.message,
    /^x\.yaml: config\.keepCheckpoints must be 0 \(keep every version\) or an integer >= 2 .*, got 1$/,
  );
  t.equal((await bad('keepCheckpoints: 2.5\n')).key, 'keepCheckpoints');
  t.equal((await bad('keepCheckpoints: all\n')).key, 'keepCheckpoints');
  t.equal((await parseJobConfig('{}', 'c')).keepCheckpoints, 5, 'default: the newest 5 versions (and v0)');
  t.equal((await parseJobConfig('keepCheckpoints: 0\n', 'c.yaml')).keepCheckpoints, 0, '0 keeps all');
  // Asynchronous runs roll out on up to maxStaleness + 1 versions: the window must hold them.
  const stale = await bad('maxStaleness: 2\nkeepCheckpoints: 2\n');
  t.equal(stale.key, 'keepCheckpoints');
  t.match(
    stale.message,
    /must be 0 \(keep every version\) or an integer >= maxStaleness \+ 1 = 3 .*, got 2$/,
  );
  t.equal((await parseJobConfig('maxStaleness: 2\nkeepCheckpoints: 3\n', 'c.yaml')).keepCheckpoints, 3);
  t.equal((await parseJobConfig('maxStaleness: 1\nkeepCheckpoints: 2\n', 'c.yaml')).keepCheckpoints, 2);
});

t.test(
  'a run evaluates as it was started: run.started records the eval settings and a resume reads them',
  async (t) => {
    const started = await parseJobConfig('evalQuestions: 0\nevalSplits: [dev, test]\n', 'run.yaml');
    const setup = runSetup({
      spec: {
        train: started.train,
        worldDir: '/w',
        basePolicy: '/p',
        topK: 3,
        eval: { questions: started.evalQuestions, splits: started.evalSplits },
        keepCheckpoints: 3,
      },
      questions: [
        { id: 'q0', gold: ['a'], text: 'q?', split: 'train/1', withToolPrompt: [1, 2], noToolPrompt: [1] },
      ],
      context: 64,
      padId: 0,
      tools: [],
      index: { dir: '/w/index', fingerprint: 'f' },
      resume: null,
      akbeVersion: 'test',
    });
    // Through the catalog's validation, as the log stores it.
    const event = validateEvent(
      JSON.parse(
        JSON.stringify(
          createEvent('run.started', setup.runStarted, { runId: 'r', step: 0, policyVersion: 0 }),
        ),
      ),
    );
    t.equal(event.type, 'run.started');
    const spec = runSpecOf((event as { data: { config: Record<string, unknown> } }).data.config);
    t.same(spec.eval, { questions: 0, splits: ['dev', 'test'] });
    t.equal(spec.keepCheckpoints, 3, 'keepCheckpoints holds across a resume too');
    // `akbe train --resume` without --config parses '{}': its defaults (32 dev questions) must not win.
    const resumeJob = await parseJobConfig('{}', 'config');
    t.equal(resumeJob.evalQuestions, 32);
    const lines: string[] = [];
    t.same(
      runEvalSettings(spec, resumeJob, (l) => lines.push(l)),
      { questions: 0, splits: ['dev', 'test'] },
    );
    t.same(lines, []);
    // A log from before the settings were recorded: the config's, said in a line.
    const { evalQuestions: _q, evalSplits: _s, ...older } = setup.runStarted.config;
    const old = runSpecOf(older);
    t.equal(old.eval, undefined);
    t.equal(spec.train.akbeAggregation, 'per-target', 'recorded: resumed as recorded');
    const { akbeAggregation: _a, ...beforeAggregation } = setup.runStarted.config;
    t.equal(
      runSpecOf(beforeAggregation).train.akbeAggregation,
      'pooled',
      'a log before it: the pooled mean it trained',
    );
    t.equal(spec.train.batchInvariantDecode, true, 'recorded (the default): resumed as recorded');
    const { batchInvariantDecode: _b, ...beforeInvariant } = setup.runStarted.config;
    t.equal(
      runSpecOf(beforeInvariant).train.batchInvariantDecode,
      false,
      'a log before the setting (session 6): the plain decoder it ran, not the new default',
    );
    t.same(
      runEvalSettings(old, resumeJob, (l) => lines.push(l)),
      { questions: 32, splits: ['dev'] },
    );
    t.match(lines, [/records no eval settings \(an older log\): evaluating 32 questions of dev/]);
  },
);

t.test('facts map to catalog events with seeds in the envelope and identity dedupe ids', async (t) => {
  const clock = new ManualClock();
  const started = factToEvent(
    {
      type: 'rollout.started',
      step: 1,
      questionId: 'q7',
      rolloutId: 's1.q7.nt0',
      path: 'no-tool',
      index: 0,
      seed: 99,
      policyVersion: 1,
    },
    { runId: 'r', clock },
  )!;
  t.equal(started.meta.step, 1, 'the step comes from the fact (the rollout input carries it)');
  t.equal(started.meta.seed, 99);
  t.equal(started.meta.dedupeId, 'r:1:s1.q7.nt0:rollout.started');
  const label = factToEvent(
    {
      type: 'boundary.labeled',
      step: 2,
      policyVersion: 2,
      label: {
        questionId: 'q7',
        wt: true,
        nt: false,
        category: 'tool-dependent',
        target: { rolloutId: 's2.q7.wt1', path: 'with-tool', context: 'with-tool', candidates: 2 },
        tieBreakSeed: 1234,
      },
      selectionRule: 'min-tool-calls',
      previousCategory: 'both-wrong',
    },
    { runId: 'r', clock },
  )!;
  t.equal(label.type, 'boundary.labeled');
  t.equal(label.meta.seed, 1234, 'the tie-break seed is in the envelope');
  t.equal(
    factToEvent(
      { type: 'group.discarded', questionId: 'q', policyVersion: 0, expectedVersion: 1 },
      { runId: 'r' },
    ),
    null,
  );
  t.throws(
    () => factToEvent({ type: 'policy.published', step: 0, version: 1 }, { runId: 'r', clock }),
    /no checkpoint recorded for version 1/,
  );
});

t.test('the step line shows EM, TC, TP, categories, shifts, tokens/s and seconds', async (t) => {
  const line = formatStepLine({
    step: 3,
    policyVersion: 3,
    em: 0.5,
    noToolEm: 0.25,
    tc: 1.25,
    tp: 0.4,
    categories: { 'tool-dependent': 3, efficiency: 2, hallucination: 1, 'both-wrong': 2 },
    boundaryShifts: 4,
    tokensPerSecond: 5123.4,
    rolloutSeconds: 12.34,
    trainSeconds: 3.21,
    loss: 0.12345,
  });
  t.equal(
    line,
    'step 3 v3  EM 0.500 (no-tool 0.250)  TC 1.25  TP 0.400  tool-dep/eff/halluc/both-wrong 3/2/1/2  shifts 4  5123 tok/s  rollout 12.3s  train 3.2s  loss 0.1235',
  );
});
