/**
 * Issue 24's specs (docs/RESULTS.md): each parses, every cell's config validates, and the runs a
 * reader gets are the ones RESULTS.md describes: the λ sweep reuses the main grid's runs, and each
 * seed of the long grid's offline cell freezes its own seed's GRPO run (`{seed}` in frozenPolicy).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import t from 'tap';
import { jobConfigOf } from '../src/cli/commands/experiment-run.js';
import { parseSpec, planRuns, settingsForSeed } from '../src/experiments/spec.js';

const load = (file: string) => parseSpec(readFileSync(file, 'utf8'), file);

t.test('{seed} in frozenPolicy becomes the run seed; other settings are left as they are', async (t) => {
  t.same(settingsForSeed({ algo: 'offline-akbe', frozenPolicy: 'run:g-grpo-s{seed}' }, 7), {
    algo: 'offline-akbe',
    frozenPolicy: 'run:g-grpo-s7',
  });
  const plain = { algo: 'offline-akbe', frozenPolicy: 'run:g-grpo-s0', label: '{seed}' };
  t.equal(settingsForSeed(plain, 3), plain, 'no placeholder: the same object');
  t.same(settingsForSeed({ algo: 'grpo' }, 3), { algo: 'grpo' });
});

t.test('the main grids: grpo and akbe at seeds 0-9, on both worlds, at λ auto', async (t) => {
  for (const [file, name, world] of [
    ['experiments/main-10seeds.yaml', 'main10', '.akbe/world'],
    ['experiments/main-hard-10seeds.yaml', 'main10h', '.akbe/world-hard'],
  ] as const) {
    const spec = await load(file);
    t.equal(spec.name, name);
    t.same(spec.seeds, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const runs = planRuns(spec);
    t.same(
      runs.filter((r) => r.seed === 0).map((r) => r.runId),
      [`${name}-grpo-s0`, `${name}-akbe-s0`],
    );
    const jobs = await Promise.all(runs.map((r) => jobConfigOf(spec, r)));
    t.ok(jobs.every((j) => j.train.steps === 40 && j.world === resolve(world)));
    t.same([...new Set(jobs.map((j) => String(j.train.lambda)))], ['auto']);
    t.same(
      spec.claims.map((c) => c.metric),
      ['em', 'tc', 'tp', 'knownSearchRate'],
    );
  }
});

t.test("the λ sweep's grpo and λ-auto runs are the main grid's, with the same configs", async (t) => {
  const [main, sweep] = await Promise.all([
    load('experiments/main-10seeds.yaml'),
    load('experiments/lambda-sweep.yaml'),
  ]);
  const mainRuns = new Map(planRuns(main).map((r) => [r.runId, r]));
  const sweepRuns = planRuns(sweep);
  const shared = sweepRuns.filter((r) => mainRuns.has(r.runId));
  t.same(
    shared.map((r) => r.runId),
    [0, 1, 2, 3, 4].map((s) => `main10-grpo-s${s}`).concat([0, 1, 2, 3, 4].map((s) => `main10-akbe-s${s}`)),
  );
  for (const r of shared) {
    const [a, b] = await Promise.all([jobConfigOf(sweep, r), jobConfigOf(main, mainRuns.get(r.runId)!)]);
    t.same(a, b, `${r.runId}: the same config in both specs`);
  }
  const lambdas = await Promise.all(
    sweepRuns
      .filter((r) => !mainRuns.has(r.runId))
      .map(async (r) => (await jobConfigOf(sweep, r)).train.lambda),
  );
  t.same([...new Set(lambdas)], [0.025, 0.05, 0.2]);
});

t.test("the long grid: 150 steps, each offline seed freezes its own seed's grpo run", async (t) => {
  const spec = await load('experiments/long-150.yaml');
  const runs = planRuns(spec);
  const jobs = await Promise.all(runs.map((r) => jobConfigOf(spec, r)));
  t.ok(jobs.every((j) => j.train.steps === 150));
  const offline = runs.flatMap((r, i) =>
    r.cell.algo === 'offline-akbe' ? [[r.runId, jobs[i].train.frozenPolicy]] : [],
  );
  t.same(offline, [
    ['long150-offline-akbe-s0', 'run:long150-grpo-s0'],
    ['long150-offline-akbe-s1', 'run:long150-grpo-s1'],
    ['long150-offline-akbe-s2', 'run:long150-grpo-s2'],
  ]);
  const ids = runs.map((r) => r.runId);
  for (const s of [0, 1, 2])
    t.ok(
      ids.indexOf(`long150-grpo-s${s}`) < ids.indexOf(`long150-offline-akbe-s${s}`),
      `grpo s${s} runs first`,
    );
});
