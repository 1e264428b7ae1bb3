/**
 * `akbe train`'s config file and step line, and the fact -> event mapping: no NATS, no ORT.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { factToEvent, stepOfRolloutId } from '../src/actors/event-sink.js';
import { formatStepLine } from '../src/actors/orchestrator.js';
import { ConfigFileError, parseJobConfig } from '../src/cli/commands/train-job.js';
import { ManualClock } from '../src/events/clock.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';

t.test('configs/default.yaml and configs/tiny.yaml are valid and fill every hyperparameter', async (t) => {
  const d = await parseJobConfig(readFileSync('configs/default.yaml', 'utf8'), 'configs/default.yaml');
  t.same(Object.keys(d.train).sort(), Object.keys(DEFAULT_TRAIN_CONFIG).sort());
  t.equal(d.train.lambda, 0.05);
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
});

t.test('facts map to catalog events with seeds in the envelope and identity dedupe ids', async (t) => {
  const clock = new ManualClock();
  t.equal(stepOfRolloutId('s12.q7.wt3'), 12);
  const started = factToEvent(
    {
      type: 'rollout.started',
      questionId: 'q7',
      rolloutId: 's1.q7.nt0',
      path: 'no-tool',
      index: 0,
      seed: 99,
      policyVersion: 1,
    },
    { runId: 'r', clock },
  )!;
  t.equal(started.meta.step, 1, 'the step comes from the rollout id when not given');
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
