/**
 * `akbe experiment run` and `report` on a real 2-algorithm x 2-seed grid of the tiny fixtures
 * (steps 2): the runner is SIGKILLed inside the first run's step 1 (AKBE_TEST_KILL_AT, not a timed
 * kill), run again it resumes that run and starts the three others, a third time it skips all four;
 * the report's numbers equal those worked out here from the runs' events.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { EventStore } from '../src/events/store.js';
import { runCli } from './helpers/cli.js';
import { startCli } from './helpers/cli-process.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture } from './helpers/tiny-run.js';

t.setTimeout(240_000);

const RUNS = ['xt-grpo-s1', 'xt-grpo-s2', 'xt-akbe-s1', 'xt-akbe-s2'];
const T975_1 = 12.706205; // t(0.975, 1): two seeds

t.test('a killed grid resumes, a finished one is skipped, the report equals its events', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const dir = mkdtempSync(join(tmpdir(), 'akbe-experiment-'));
  const home = join(dir, 'home');
  const spec = join(dir, 'xt.yaml');
  writeFileSync(
    spec,
    JSON.stringify({
      name: 'xt',
      world: fx.worldDir,
      policy: fx.policyDir,
      steps: 2,
      config: {
        batchQuestions: 2,
        miniBatchQuestions: 1,
        gWithTool: 2,
        gNoTool: 2,
        maxToolCalls: 2,
        maxResponseTokens: 40,
        lr: 0.001,
        evalQuestions: 2,
        evalSplits: ['dev'],
      },
      seeds: [1, 2],
      grid: [{ algo: 'grpo' }, { algo: 'akbe' }],
    }),
  );
  const flags = ['--spec', spec, '--nats', nats.server.url, '--home', home];

  const killed = startCli(['experiment', 'run', ...flags], { AKBE_TEST_KILL_AT: 'train:1' });
  t.equal(await killed.exited, null, 'SIGKILLed');
  t.match(killed.output(), /AKBE_TEST_KILL_AT: killing this process at train:1/);
  t.match(killed.output(), /starting xt-grpo-s1 \(grpo, seed 1;/);

  const again = await runCli('experiment', 'run', ...flags);
  t.equal(again.code, 0, again.err);
  t.match(again.err, /resuming xt-grpo-s1 after step 0 \(grpo, seed 1;/);
  for (const id of RUNS.slice(1)) t.match(again.err, new RegExp(`starting ${id} `));
  t.match(again.err, /experiment xt \[#+\] 100\.0% 8\/8/, 'one bar for the grid, counted in steps');
  t.match(again.err, /4 of 4 runs completed/);

  const store = await EventStore.open(nats.nc);
  const ofType = async <K extends Parameters<EventStore['replayType']>[1]>(run: string, type: K) => {
    const out = [];
    for await (const { event } of store.replayType(run, type)) out.push(event);
    return out;
  };
  for (const id of RUNS) {
    t.same(
      (await ofType(id, 'run.finished')).map((e) => e.data.status),
      ['completed'],
      `${id} completed once`,
    );
    t.same(
      (await ofType(id, 'learner.step')).map((e) => e.meta.step),
      [0, 1],
      `${id}: each step once`,
    );
    t.same(
      (await ofType(id, 'run.started')).map((e) => e.data.config.seed),
      [Number(id.at(-1))],
      `${id}: its seed`,
    );
  }

  const third = await runCli('experiment', 'run', ...flags);
  t.equal(third.code, 0);
  t.match(third.err, /4 of 4 runs already finished; skipping them/);
  t.notMatch(third.err, /starting|resuming/);

  const out = join(dir, 'report');
  const rep = await runCli('experiment', 'report', ...flags, '--out', out);
  t.equal(rep.code, 0, rep.err);
  const json = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  t.same(
    json,
    JSON.parse(readFileSync(join(home, 'experiments', 'xt', 'report.json'), 'utf8')),
    'also in the home',
  );

  // By hand from the events: train = mean over the run's two steps; dev = the after evaluation.
  const trainEm = async (id: string) => {
    const steps = await ofType(id, 'learner.step');
    return steps.reduce((a, e) => a + e.data.metrics.em, 0) / steps.length;
  };
  const devAfter = async (id: string) =>
    (await ofType(id, 'eval.completed')).find((e) => e.data.when === 'after')!.data;
  const [g1, g2, a1, a2] = await Promise.all(RUNS.map(trainEm));
  const [d1, d2, e1, e2] = await Promise.all(RUNS.map(devAfter));
  t.equal(d1.version, 2, 'evaluated the final policy');
  const cell = (split: string, label: string) =>
    json.data.splits
      .find((s: { split: string }) => s.split === split)
      .cells.find((c: { label: string }) => c.label === label);
  const close = (got: number, want: number, what: string) =>
    t.ok(Math.abs(got - want) < 1e-12, `${what}: ${got} vs ${want}`);
  close(cell('train', 'grpo').summary.em.mean, (g1 + g2) / 2, 'grpo train EM mean');
  close(cell('train', 'grpo').summary.em.half, (T975_1 * Math.abs(g1 - g2)) / 2, 'grpo train EM half-width');
  close(cell('train', 'akbe').diff.em.mean, (a1 - g1 + (a2 - g2)) / 2, 'akbe - grpo train EM');
  close(
    cell('train', 'akbe').diff.em.half,
    (T975_1 * Math.abs(a1 - g1 - (a2 - g2))) / 2,
    'paired half-width',
  );
  close(cell('dev', 'grpo').summary.tc.mean, (d1.tc + d2.tc) / 2, 'grpo dev TC');
  close(cell('dev', 'akbe').summary.em.mean, (e1.em + e2.em) / 2, 'akbe dev EM');
  // The tiny policy answers nothing right (EM 0), so the per-step response lengths carry the check.
  const lengths = async (id: string) =>
    (await ofType(id, 'learner.step')).map((e) => e.data.metrics.meanResponseLength);
  const [l1, l2] = await Promise.all(RUNS.slice(0, 2).map(lengths));
  const lenPlot = json.plots.find((p: { title: string }) => p.title.startsWith('response length'));
  const grpoLen = lenPlot.series.find((s: { label: string }) => s.label === 'grpo');
  t.ok(l1[0] > 0 && l2[0] > 0, 'responses have lengths');
  t.same(
    grpoLen.values,
    [0, 1].map((i) => (l1[i] + l2[i]) / 2),
  );
  t.same(
    grpoLen.lo,
    [0, 1].map((i) => Math.min(l1[i], l2[i])),
  );
  t.same(
    grpoLen.hi,
    [0, 1].map((i) => Math.max(l1[i], l2[i])),
  );
  t.equal(json.tables[0].rows[0][0], 'grpo');
  // EM is a rate bounded in [0, 1]: its interval is the bootstrap's, and of two seeds that is
  // [min, max] (resample means min, mid, max with P 1/4, 1/2, 1/4)
  t.equal(
    json.tables[0].rows[0][2],
    `${((g1 + g2) / 2).toFixed(3)} [${Math.min(g1, g2).toFixed(3)}, ${Math.max(g1, g2).toFixed(3)}]`,
  );
  t.match(readFileSync(join(out, 'README.md'), 'utf8'), /## dev \(final evaluation\)/);
  t.match(readFileSync(join(out, 'plot-em.svg'), 'utf8'), /^<svg /);
});
