/**
 * The three shipped projections folded over small hand-built logs, every expected value written
 * out by hand (issue 16: the projections were only reached through integration tests, which
 * compare a store fold with an in-memory fold of the same code). Events are built fresh per
 * subtest; `evolve` never validates, so each one carries only the fields its projection reads.
 */
import t from 'tap';
import { type AkbeEvent, EVENT_TYPES, type EventType } from '../src/events/catalog.js';
import { defineProjection, fold } from '../src/events/projection.js';
import { lastCategories, resumedFrom, resumePoint } from '../src/events/projections/resume-point.js';
import { RUN_FIGURE_TYPES, runFigures } from '../src/events/projections/run-figures.js';
import { runSummary } from '../src/events/projections/run-summary.js';

let n = 0;
/** A loose event: type, data and the meta fields the projections read (ids are unique per call). */
function ev(type: EventType, data: Record<string, unknown>, meta: Record<string, unknown> = {}): AkbeEvent {
  n++;
  return {
    type,
    v: 1,
    data,
    meta: { runId: 'r1', step: 0, policyVersion: 0, at: 1000 + n, dedupeId: `d${n}`, ...meta },
  } as unknown as AkbeEvent;
}

const counts = (td: number, ef: number, ha: number, bw: number) => ({
  'tool-dependent': td,
  efficiency: ef,
  hallucination: ha,
  'both-wrong': bw,
});

const labeled = (questionId: string, step: number, category: string) =>
  ev('boundary.labeled', { category }, { questionId, step });
const published = (version: number, step: number, sha256: string) =>
  ev('policy.published', { version, sha256 }, { step, policyVersion: version });

t.test('resume-point: start, last published step, per-version sha, labels, finish, dedupe ids', async (t) => {
  const started = ev('run.started', { algo: 'grpo+akbe', config: {} });
  const log = [
    started,
    published(0, 0, 'sha-base'),
    labeled('q1', 0, 'efficiency'),
    labeled('q2', 0, 'hallucination'),
    labeled('q2', 0, 'both-wrong'),
    published(1, 0, 'sha-v1'),
    ev('step.started', { step: 1 }, { step: 1 }),
    // Step 1 was labeled but never published (a crash before the trainer finished).
    labeled('q1', 1, 'tool-dependent'),
    labeled('q3', 1, 'efficiency'),
    ev('run.finished', { status: 'failed' }),
  ];
  const p = fold(resumePoint, log);
  t.strictSame([...p.known].sort(), log.map((e) => e.meta.dedupeId).sort(), 'every dedupe id, once');
  t.equal(p.known.size, 10);
  t.equal(p.runStarted, started, 'run.started kept as it is');
  t.strictSame(p.lastPublished, { step: 0, version: 1 }, 'version 0 (the base) is not a step');
  t.strictSame(
    [...p.publishedSha],
    [
      [0, 'sha-base'],
      [1, 'sha-v1'],
    ],
  );
  t.strictSame(p.labels.get('q1'), [
    { step: 0, category: 'efficiency' },
    { step: 1, category: 'tool-dependent' },
  ]);
  t.strictSame(p.labels.get('q2'), [
    { step: 0, category: 'hallucination' },
    { step: 0, category: 'both-wrong' },
  ]);
  t.strictSame(p.labels.get('q3'), [{ step: 1, category: 'efficiency' }]);
  t.equal(p.finished, true);
  t.strictSame(resumedFrom(p), { step: 0, version: 1 });
  // q1's step-1 label and q3 (labeled only in step 1) do not count; q2 keeps its last step-0 label.
  t.strictSame(lastCategories(p), { q1: 'efficiency', q2: 'both-wrong' });
});

t.test('resume-point: an empty log, only the base published, a run not finished', async (t) => {
  const empty = resumePoint.initial();
  t.strictSame(
    {
      ...empty,
      known: [...empty.known],
      publishedSha: [...empty.publishedSha],
      publishedManifest: [...empty.publishedManifest],
      labels: [...empty.labels],
    },
    {
      known: [],
      runStarted: null,
      lastPublished: null,
      publishedSha: [],
      publishedManifest: [],
      labels: [],
      finished: false,
    },
  );
  t.strictSame(resumedFrom(empty), { step: -1, version: 0 }, 'nothing done: continue after step -1 on v0');
  t.strictSame(lastCategories(empty), {});

  const p = fold(resumePoint, [
    ev('run.started', {}),
    published(0, 0, 'sha-base'),
    labeled('q1', 0, 'efficiency'),
  ]);
  t.equal(p.lastPublished, null, 'the base version alone publishes no step');
  t.equal(p.finished, false);
  t.strictSame(resumedFrom(p), { step: -1, version: 0 });
  t.strictSame(lastCategories(p), {}, 'a label of a step never published does not count');

  // Later versions replace lastPublished, step by step.
  const q = fold(resumePoint, [published(1, 0, 'a'), published(2, 1, 'b'), labeled('q1', 1, 'efficiency')]);
  t.strictSame(resumedFrom(q), { step: 1, version: 2 });
  t.strictSame(lastCategories(q), { q1: 'efficiency' }, 'a label of the last published step counts');
});

t.test('resume-point: events it has no case for only add their dedupe id', async (t) => {
  const p = fold(resumePoint, [
    ev('rollout.completed', { reward: 1 }, { questionId: 'q', rolloutId: 'r' }),
    ev('eval.completed', { when: 'before' }),
  ]);
  t.strictSame([...p.known], [`d${n - 1}`, `d${n}`]);
  t.equal(p.runStarted, null);
  t.equal(p.lastPublished, null);
  t.equal(p.labels.size, 0);
  t.equal(p.publishedSha.size, 0);
  t.equal(p.finished, false);
});

const metrics = (em: number, tc: number, tp: number | null, meanResponseLength: number, shifts: number) => ({
  em,
  tc,
  tp,
  meanResponseLength,
  categoryCounts: counts(1, 2, 0, 1),
  boundaryShifts: shifts,
});

t.test('run-figures: config, steps (last record wins), oracle rates, evals, status', async (t) => {
  t.strictSame(RUN_FIGURE_TYPES, ['run.started', 'learner.step', 'eval.completed', 'run.finished']);
  t.strictSame(runFigures.handles, RUN_FIGURE_TYPES);
  const init = runFigures.initial();
  t.strictSame(
    { ...init, steps: [...init.steps] },
    {
      algo: null,
      config: null,
      steps: [],
      evals: [],
      status: 'not-started',
    },
  );

  const evalBefore = { when: 'before', version: 0, split: 'dev', em: 0.25 };
  const evalAfter = { when: 'after', version: 2, split: 'dev', em: 0.5 };
  const s = fold(runFigures, [
    ev('run.started', { algo: 'grpo', config: { lambda: 0.05 } }),
    ev('eval.completed', evalBefore),
    ev(
      'learner.step',
      { metrics: metrics(0.5, 1.5, 0.25, 40, 0), extra: { knownSearchRate: 0.75 } },
      { step: 0 },
    ),
    ev('learner.step', { metrics: metrics(0.1, 1, null, 30, 1), extra: {} }, { step: 1 }),
    ev(
      'learner.step',
      {
        metrics: metrics(0.625, 2, 0.5, 50, 2),
        extra: { knownSearchRate: Number.NaN, unknownNoSearchRate: 0.125 },
      },
      { step: 1 },
    ),
    ev('eval.completed', evalAfter),
  ]);
  t.equal(s.algo, 'grpo');
  t.strictSame(s.config, { lambda: 0.05 });
  t.equal(s.status, 'running', 'started, not finished');
  t.strictSame([...s.steps.keys()], [0, 1]);
  t.strictSame(s.steps.get(0), {
    step: 0,
    em: 0.5,
    tc: 1.5,
    tp: 0.25,
    meanResponseLength: 40,
    categoryCounts: counts(1, 2, 0, 1),
    knownSearchRate: 0.75,
    unknownNoSearchRate: null,
  });
  t.strictSame(
    s.steps.get(1),
    {
      step: 1,
      em: 0.625,
      tc: 2,
      tp: 0.5,
      meanResponseLength: 50,
      categoryCounts: counts(1, 2, 0, 1),
      knownSearchRate: null,
      unknownNoSearchRate: 0.125,
    },
    'the second record of step 1 replaces the first; NaN is null',
  );
  t.strictSame(s.evals, [evalBefore, evalAfter], 'in log order');

  const inf = fold(runFigures, [
    ev('learner.step', { metrics: metrics(0, 0, null, 0, 0), extra: { unknownNoSearchRate: Infinity } }),
  ]);
  t.equal(inf.steps.get(0)?.unknownNoSearchRate, null, 'Infinity is null');
  t.equal(inf.status, 'not-started');
  t.equal(fold(runFigures, [ev('run.finished', { status: 'aborted' })]).status, 'aborted');
});

t.test(
  'run-summary: run id, status, algo, times, steps, version, counts, latest metrics, reason',
  async (t) => {
    const init = runSummary.initial();
    t.strictSame(Object.keys(init.counts), EVENT_TYPES, 'a count for every type');
    t.ok(Object.values(init.counts).every((c) => c === 0));
    t.strictSame(
      { ...init, counts: undefined },
      {
        runId: null,
        status: 'not-started',
        algo: null,
        startedAt: null,
        finishedAt: null,
        steps: 0,
        lastStep: null,
        policyVersion: 0,
        counts: undefined,
        latest: null,
        reason: null,
      },
    );

    const log = [
      ev('run.started', { algo: 'grpo+akbe' }, { runId: 'run-a', at: 5000 }),
      ev('step.started', { step: 0 }, { runId: 'run-b' }),
      ev('rollout.turn', {}, { questionId: 'q', rolloutId: 'r' }),
      ev('rollout.turn', {}, { questionId: 'q', rolloutId: 'r' }),
      ev('learner.step', { metrics: metrics(0.5, 1.5, 0.25, 40, 3) }),
      ev('policy.published', { version: 2 }),
      ev('step.started', { step: 7 }),
      ev('policy.published', { version: 1 }),
      ev('learner.step', { metrics: metrics(0.75, 0.5, null, 20, 1) }),
      ev('run.finished', { status: 'failed', reason: 'trainer died' }, { at: 9000 }),
    ];
    const s = fold(runSummary, log);
    t.equal(s.runId, 'run-a', 'the first event names the run');
    t.equal(s.status, 'failed');
    t.equal(s.algo, 'grpo+akbe');
    t.equal(s.startedAt, 5000);
    t.equal(s.finishedAt, 9000);
    t.equal(s.steps, 2);
    t.equal(s.lastStep, 7);
    t.equal(s.policyVersion, 2, 'the highest version published, not the last');
    t.strictSame(s.latest, {
      em: 0.75,
      tc: 0.5,
      tp: null,
      categoryCounts: counts(1, 2, 0, 1),
      boundaryShifts: 1,
    });
    t.equal(s.reason, 'trainer died');
    const expected = Object.fromEntries(EVENT_TYPES.map((type) => [type, 0]));
    Object.assign(expected, {
      'run.started': 1,
      'step.started': 2,
      'rollout.turn': 2,
      'learner.step': 2,
      'policy.published': 2,
      'run.finished': 1,
    });
    t.strictSame(s.counts, expected);
    t.strictSame(init.counts['rollout.turn'], 0, 'folding never changes the initial state');

    const ok = fold(runSummary, [
      ev('run.started', { algo: 'grpo' }),
      ev('run.finished', { status: 'completed' }),
    ]);
    t.equal(ok.reason, null, 'no reason: null');
    t.equal(ok.status, 'completed');
    const running = fold(runSummary, [ev('run.started', { algo: 'grpo' })]);
    t.equal(running.status, 'running');
    t.equal(running.finishedAt, null);
  },
);

t.test('the projections carry their documented names', async (t) => {
  t.strictSame(
    [resumePoint.name, runFigures.name, runSummary.name],
    ['resume-point', 'run-figures', 'run-summary'],
  );
});

t.test('fold: only the handled types reach evolve, from the given state', async (t) => {
  const seen: string[] = [];
  const p = defineProjection({
    name: 'types',
    handles: ['run.started', 'run.finished'] as const,
    initial: () => 10,
    evolve(s: number, e) {
      seen.push(e.type);
      return s + 1;
    },
  });
  const log = [ev('run.started', {}), ev('step.started', {}), ev('run.finished', {}), ev('learner.step', {})];
  t.equal(fold(p, log), 12, 'from initial(): two handled events');
  t.strictSame(seen, ['run.started', 'run.finished']);
  t.equal(fold(p, log, 100), 102, 'from a given state');
  t.equal(fold(p, []), 10);
});
