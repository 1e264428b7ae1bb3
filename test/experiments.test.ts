/**
 * The experiment spec, the statistics and the report, without NATS: a 2-algorithm x 2-seed grid's
 * events built by hand, folded by the run-figures projection, and every reported number checked
 * against values worked out by hand from those events.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { jobConfigOf } from '../src/cli/commands/experiment-run.js';
import { type AkbeEvent, createEvent } from '../src/events/catalog.js';
import { fold } from '../src/events/projection.js';
import { type RunFigures, runFigures } from '../src/events/projections/run-figures.js';
import { reportFiles, reportJson } from '../src/experiments/render.js';
import { buildReport } from '../src/experiments/report.js';
import { parseSpec, planRuns, runIdOf } from '../src/experiments/spec.js';
import { summarize, tQuantile975 } from '../src/experiments/stats.js';
import { runCli } from './helpers/cli.js';

const SPEC = `
name: hand
base: configs/tiny.yaml
seeds: [1, 2]
grid:
  - algo: grpo
  - algo: akbe
`;

t.test('t quantiles equal scipy.stats.t.ppf(0.975, df)', async (t) => {
  // scipy 1.x: t.ppf(0.975, [1, 2, 4, 30, 31, 40, 60, 1000])
  const want: Array<[number, number]> = [
    [1, 12.706205],
    [2, 4.302653],
    [4, 2.776445],
    [30, 2.042272],
    [31, 2.039513],
    [40, 2.021075],
    [60, 2.000298],
    [1000, 1.962339],
  ];
  for (const [df, q] of want)
    t.ok(Math.abs(tQuantile975(df) - q) < 5e-6, `df ${df}: ${tQuantile975(df)} vs ${q}`);
  t.throws(() => tQuantile975(0), /integer >= 1/);
});

t.test('summarize: mean, sample sd (ddof 1) and the t half-width', async (t) => {
  const s = summarize([0.5, 0.7, null, 0.9]);
  t.equal(s.n, 3);
  t.ok(Math.abs(s.mean! - 0.7) < 1e-12);
  t.ok(Math.abs(s.sd! - 0.2) < 1e-12); // deviations -0.2, 0, 0.2: sqrt(0.08 / 2)
  t.ok(Math.abs(s.half! - (4.302653 * 0.2) / Math.sqrt(3)) < 1e-9);
  t.same(summarize([0.4]), { n: 1, mean: 0.4, half: null, sd: null });
  t.same(summarize([null]), { n: 0, mean: null, half: null, sd: null });
});

t.test('spec: cells expand list values, run ids are deterministic, errors name file and key', async (t) => {
  const spec = await parseSpec(
    `${SPEC}  - algo: akbe\n    targetContext: [own, with-tool]\n    lambda: auto\n`.replace(
      '  - algo: akbe\n',
      '',
    ),
    'x.yaml',
  );
  t.same(
    spec.cells.map((c) => c.label),
    ['grpo', 'akbe targetContext=own lambda=auto', 'akbe targetContext=with-tool lambda=auto'],
  );
  t.equal(spec.baseline, 'grpo');
  const runs = planRuns(spec);
  t.same(
    runs.map((r) => r.runId),
    [
      'hand-grpo-s1',
      'hand-grpo-s2',
      'hand-akbe_targetContext_own_lambda_auto-s1',
      'hand-akbe_targetContext_own_lambda_auto-s2',
      'hand-akbe_targetContext_with-tool_lambda_auto-s1',
      'hand-akbe_targetContext_with-tool_lambda_auto-s2',
    ],
  );
  const long = runIdOf('n', 'x'.repeat(80), 3);
  t.match(long, /^n-[0-9a-f]{12}-s3$/);
  t.equal(runIdOf('n', 'x'.repeat(80), 3), long);
  const bad = async (text: string, re: RegExp) => t.rejects(parseSpec(text, 'e.yaml'), re);
  await bad('name: a b\nseeds: [1]\ngrid: [{algo: grpo}]', /^e\.yaml: name: must be 1-32 characters/);
  await bad('name: a\nseeds: [1, 1]\ngrid: [{algo: grpo}]', /^e\.yaml: seeds\[1\]: repeats seed 1/);
  await bad(
    'name: a\nseeds: [1]\ngrid: [{algo: grpo}, {lr: 1}]',
    /^e\.yaml: grid\[1\]\.algo: must be an algorithm name/,
  );
  await bad(
    'name: a\nseeds: [1]\ngrid: [{algo: grpo, seed: 3}]',
    /^e\.yaml: grid\[0\]\.seed: seeds come from/,
  );
  await bad(
    'name: a\nseeds: [1]\ngrid: [{algo: grpo}, {algo: grpo}]',
    /^e\.yaml: grid\[1\]: repeats the cell 'grpo' of grid\[0\]/,
  );
  await bad('name: a\nseeds: [1]\ngrid: [{algo: grpo}]\nstep: 3', /^e\.yaml: step: unknown key/);
  await bad(
    'name: a\nseeds: [1]\nbaseline: x\ngrid: [{algo: grpo}]',
    /^e\.yaml: baseline: names no cell; the cells are grpo/,
  );
});

t.test('a cell config error names the spec file and the grid key', async (t) => {
  const r = await runCli(
    'experiment',
    'run',
    '--spec',
    'test/fixtures/experiments/bad-lambda.yaml',
    '--dry-run',
  );
  t.equal(r.code, 1);
  t.match(r.err, /bad-lambda\.yaml: grid\[1\]\.lambda: config\.lambda must be a number >= 0 or 'auto'/);
});

t.test(
  "paper.yaml, paper-hard.yaml parse, every cell's config validates, offline-akbe freezes the grpo seed-0 run",
  async (t) => {
    for (const [file, seeds] of [
      ['experiments/paper.yaml', [0, 1, 2]],
      ['experiments/paper-hard.yaml', [0, 1, 2]],
    ] as const) {
      const spec = await parseSpec(readFileSync(file, 'utf8'), file);
      t.same(
        [...new Set(spec.cells.map((c) => c.algo))],
        ['grpo', 'akbe', 'offline-akbe', 'dpo-akbe', 'otc-po', 'beta-grpo'],
      );
      t.same(spec.seeds, seeds);
      const runs = planRuns(spec);
      t.equal(runs.length, 8 * seeds.length, 'grpo, akbe x 2 contexts, offline, dpo, otc, beta x 2');
      const jobs = await Promise.all(runs.map((r) => jobConfigOf(spec, r)));
      t.same(
        jobs.filter((j) => j.train.algo === 'beta-grpo').map((j) => j.train.algoOptions),
        [...seeds.map(() => ({ beta: 0.4 })), ...seeds.map(() => ({ beta: 0.8 }))],
        'beta-grpo at its default beta and at 0.8',
      );
      const ids = runs.map((r) => r.runId);
      const offline = runs.flatMap((r, i) =>
        r.cell.algo === 'offline-akbe' ? [[r.runId, jobs[i].train.frozenPolicy]] : [],
      );
      t.same(
        offline,
        seeds.map((s) => [`${spec.name}-offline-akbe-s${s}`, `run:${spec.name}-grpo-s0`]),
      );
      t.ok(
        ids.indexOf(`${spec.name}-grpo-s0`) < ids.indexOf(`${spec.name}-offline-akbe-s0`),
        'the frozen run runs first',
      );
      t.ok(
        jobs.every((j, i) => (j.train.frozenPolicy !== undefined) === (runs[i].cell.algo === 'offline-akbe')),
      );
    }
    const r = await runCli(
      'experiment',
      'run',
      '--spec',
      'test/fixtures/experiments/unknown-algo.yaml',
      '--dry-run',
    );
    t.equal(r.code, 1);
    t.match(
      r.err,
      /unknown-algo\.yaml: grid\[1\]\.algo: 'ppo-akbe' is not a registered algorithm \(registered: akbe, beta-grpo, dpo-akbe, grpo, offline-akbe, otc-po\); run the others with --algos grpo/,
    );
    const tiny = await parseSpec(readFileSync('experiments/tiny.yaml', 'utf8'), 'experiments/tiny.yaml');
    t.same(
      planRuns(tiny).map((r) => r.runId),
      ['tiny-grpo-s1', 'tiny-grpo-s2', 'tiny-akbe-s1', 'tiny-akbe-s2'],
    );
  },
);

// ---- the report of a hand-built 2 x 2 grid ------------------------------------------------------

const cats = (td: number, ef: number) => ({
  'tool-dependent': td,
  efficiency: ef,
  hallucination: 0,
  'both-wrong': 2 - td - ef,
});

interface StepIn {
  em: number;
  tc: number;
  tp: number | null;
  len: number;
  td: number;
  ef: number;
  known?: number;
}

function runEvents(
  runId: string,
  algo: string,
  steps: StepIn[],
  evalEm: number,
  evalTc: number,
): AkbeEvent[] {
  const at = { runId, policyVersion: 0 };
  const ev: AkbeEvent[] = [
    createEvent(
      'run.started',
      { algo, config: { algo }, seeds: { run: 1 }, worldRef: 'w', policyRef: 'p', akbeVersion: '0' },
      { ...at, step: 0 },
    ),
    createEvent(
      'eval.completed',
      {
        when: 'before',
        version: 0,
        split: 'dev',
        questions: 4,
        em: 0.1,
        tc: 9,
        tp: null,
        noToolEm: 0,
        knownSearchRate: null,
        unknownNoSearchRate: null,
      },
      { ...at, step: 0 },
    ),
  ];
  steps.forEach((s, step) => {
    ev.push(
      createEvent(
        'learner.step',
        {
          policyVersionBefore: step,
          policyVersionAfter: step + 1,
          metrics: {
            loss: 0,
            lossGrpo: 0,
            lossAkbe: 0,
            gradNorm: 0,
            clipFrac: 0,
            kl: 0,
            entropy: 0,
            em: s.em,
            tc: s.tc,
            tp: s.tp,
            categoryCounts: cats(s.td, s.ef),
            boundaryShifts: 0,
            meanResponseLength: s.len,
            toolCallsPerBatch: 0,
            tokensPerSecond: 0,
            rolloutSeconds: 0,
            trainSeconds: 0,
            updates: 1,
          },
          extra: s.known === undefined ? {} : { knownSearchRate: s.known, unknownNoSearchRate: 1 - s.known },
        },
        { runId, step, policyVersion: step },
      ),
    );
  });
  ev.push(
    createEvent(
      'eval.completed',
      {
        when: 'after',
        version: 2,
        split: 'dev',
        questions: 4,
        em: evalEm,
        tc: evalTc,
        tp: evalTc ? evalEm / evalTc : null,
        noToolEm: 0,
        knownSearchRate: 0.5,
        unknownNoSearchRate: 0.25,
      },
      { runId, step: 1, policyVersion: 2 },
    ),
    createEvent(
      'run.finished',
      { status: 'completed', stepsCompleted: 2, elapsedSeconds: 1 },
      { runId, step: 1, policyVersion: 2 },
    ),
  );
  return ev;
}

function near(
  t: { ok: (c: boolean, m: string) => unknown },
  got: number | null | undefined,
  want: number,
  what: string,
) {
  t.ok(got !== null && got !== undefined && Math.abs(got - want) < 1e-9, `${what}: ${got} vs ${want}`);
}

t.test('report of a 2 x 2 grid equals the hand-worked figures of its events', async (t) => {
  const spec = await parseSpec(SPEC, 'hand.yaml');
  const planned = planRuns(spec);
  const logs: Record<string, AkbeEvent[]> = {
    'hand-grpo-s1': runEvents(
      'hand-grpo-s1',
      'grpo',
      [
        { em: 0.5, tc: 2, tp: 0.25, len: 30, td: 1, ef: 0, known: 1 },
        { em: 0.75, tc: 1.5, tp: 0.5, len: 20, td: 1, ef: 1, known: 0.5 },
      ],
      0.5,
      2,
    ),
    'hand-grpo-s2': runEvents(
      'hand-grpo-s2',
      'grpo',
      [
        { em: 0.25, tc: 1, tp: 0.25, len: 40, td: 0, ef: 0 },
        { em: 0.25, tc: 1, tp: null, len: 10, td: 2, ef: 0, known: 1 },
      ],
      0.25,
      1,
    ),
    'hand-akbe-s1': runEvents(
      'hand-akbe-s1',
      'akbe',
      [
        { em: 1, tc: 0.5, tp: 2, len: 12, td: 0, ef: 2, known: 0 },
        { em: 0.5, tc: 0.5, tp: 1, len: 14, td: 1, ef: 1, known: 0 },
      ],
      0.75,
      1,
    ),
    // akbe seed 2: killed and never finished: it must not count
    'hand-akbe-s2': runEvents(
      'hand-akbe-s2',
      'akbe',
      [{ em: 1, tc: 0, tp: null, len: 5, td: 0, ef: 0 }],
      1,
      0,
    ).filter((e) => e.type !== 'run.finished' && !(e.type === 'eval.completed' && e.data.when === 'after')),
  };
  const figures = new Map<string, RunFigures>(
    Object.entries(logs).map(([id, ev]) => [id, fold(runFigures, ev)]),
  );
  const r = buildReport(spec, planned, figures);
  t.same(
    r.runs.map((x) => x.status),
    ['completed', 'completed', 'completed', 'running'],
  );
  t.same(
    r.splits.map((s) => s.split),
    ['train', 'dev'],
  );

  // train split: each run's mean over its (two) steps
  // grpo s1: EM (0.5+0.75)/2 = 0.625, TC 1.75, TP 0.375, known 0.75; s2: EM 0.25, TC 1, TP 0.25 (null skipped), known 1
  const [trainGrpo, trainAkbe] = r.splits[0].cells;
  near(t, trainGrpo.summary.em.mean, (0.625 + 0.25) / 2, 'grpo train EM mean');
  // two values a, b: sd = |a - b| / sqrt 2, half = t(0.975, 1) * sd / sqrt 2 = 12.706205 * |a - b| / 2
  near(t, trainGrpo.summary.em.half, (12.706205 * 0.375) / 2, 'grpo train EM half-width');
  near(t, trainGrpo.summary.tc.mean, (1.75 + 1) / 2, 'grpo train TC');
  near(t, trainGrpo.summary.tp.mean, (0.375 + 0.25) / 2, 'grpo train TP');
  near(t, trainGrpo.summary.knownSearchRate.mean, (0.75 + 1) / 2, 'grpo known-search');
  near(t, trainGrpo.summary.unknownNoSearchRate.mean, (0.25 + 0) / 2, 'grpo unknown-no-search');
  // akbe: one completed seed (s1): EM 0.75, TC 0.5, TP 1.5; no interval
  t.equal(trainAkbe.summary.em.n, 1);
  near(t, trainAkbe.summary.em.mean, 0.75, 'akbe train EM');
  t.equal(trainAkbe.summary.em.half, null);
  near(t, trainAkbe.summary.tp.mean, 1.5, 'akbe train TP');
  // paired with grpo on seed 1 only: EM 0.75 - 0.625, TC 0.5 - 1.75
  t.equal(trainAkbe.diff!.em.n, 1);
  near(t, trainAkbe.diff!.em.mean, 0.125, 'akbe - grpo train EM');
  near(t, trainAkbe.diff!.tc.mean, -1.25, 'akbe - grpo train TC');

  // dev split: the after evaluations
  const [devGrpo, devAkbe] = r.splits[1].cells;
  near(t, devGrpo.summary.em.mean, 0.375, 'grpo dev EM');
  near(t, devGrpo.summary.em.half, (12.706205 * 0.25) / 2, 'grpo dev EM half-width');
  near(t, devGrpo.summary.tc.mean, 1.5, 'grpo dev TC');
  near(t, devGrpo.summary.tp.mean, (0.25 + 0.25) / 2, 'grpo dev TP');
  near(t, devAkbe.diff!.em.mean, 0.25, 'akbe - grpo dev EM (seed 1)');

  // per step: mean and min..max over completed seeds
  const tc = r.plots.find((p) => p.key === 'tc')!;
  t.same(tc.steps, [0, 1]);
  // seeds: each completed seed's value per step (s1, s2): step 0 TC 2, 1; step 1 1.5, 1
  t.same(tc.series[0], {
    label: 'grpo',
    mean: [1.5, 1.25],
    lo: [1, 1],
    hi: [2, 1.5],
    seeds: [
      [2, 1],
      [1.5, 1],
    ],
  });
  t.same(tc.series[1].mean, [0.5, 0.5]);
  const td = r.plots.find((p) => p.key === 'tool-dependent')!;
  t.same(td.series[0].mean, [0.5, 1.5]);
  const known = r.plots.find((p) => p.key === 'knownSearchRate')!;
  t.same(known.series[0], {
    label: 'grpo',
    mean: [1, 0.75],
    lo: [1, 0.5],
    hi: [1, 1],
    seeds: [[1], [0.5, 1]],
  });

  // the files: markdown table cells, report.json in the dashboard's shape, one SVG per plot
  const files = reportFiles(r);
  // EM is a rate: the bootstrap interval of two values 0.625, 0.25 is [0.25, 0.625] (resample means
  // 0.25, 0.4375, 0.625 with P 1/4, 1/2, 1/4); TC keeps the t-interval
  t.match(files.get('README.md')!, /\| grpo \| 2 \| 0\.438 \[0\.250, 0\.625\] \| 1\.375 ± /);
  t.match(files.get('README.md')!, /\| akbe \| 1 \| \+0\.125 \| -1\.250 \|/);
  t.match(files.get('README.md')!, /hand-akbe-s2 \| akbe \| 2 \| running/);
  const json = reportJson(r) as { tables: Array<{ rows: unknown[][] }>; plots: Array<{ series: unknown[] }> };
  t.equal(json.tables.length, 4);
  t.same(json.tables[0].rows[0].slice(0, 2), ['grpo', 2]);
  t.equal(files.get('plot-tc.svg')!.match(/<polyline /g)?.length, 2);
  t.match(files.get('plot-tc.svg')!, /<polygon points=/);
  const { mkdtempSync, mkdirSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'akbe-exp-'));
  mkdirSync(join(dir, 'hand'));
  writeFileSync(join(dir, 'hand', 'report.json'), files.get('report.json')!);
  const { readExperiments } = await import('../src/dashboard/experiments.js');
  const [shown] = await readExperiments(dir);
  t.equal(shown.error, undefined);
  t.equal(shown.tables.length, 4);
  t.equal(shown.plots.length, 8);
});
