/**
 * Issue 24's acceptance: the Claims section of a tiny 2-cell x 3-seed spec, from events built by
 * hand, against numbers computed by hand from those events; and the spec's claims validation.
 */
import t from 'tap';
import { type AkbeEvent, createEvent } from '../src/events/catalog.js';
import { fold } from '../src/events/projection.js';
import { type RunFigures, runFigures } from '../src/events/projections/run-figures.js';
import { reportFiles } from '../src/experiments/render.js';
import { buildReport } from '../src/experiments/report.js';
import { parseSpec, planRuns, SpecError } from '../src/experiments/spec.js';

const SPEC = `
name: claims
base: configs/tiny.yaml
seeds: [0, 1, 2]
grid:
  - algo: grpo
  - algo: akbe
claims:
  - { claim: AKBE raises test EM, metric: em, split: test, direction: greater, cells: [akbe, grpo], test: paired }
  - { claim: AKBE lowers test TC, metric: tc, split: test, direction: less, cells: [akbe, grpo] }
  - { claim: AKBE raises the known-search rate, metric: knownSearchRate, split: test, direction: greater, cells: [akbe, grpo] }
`;

/** A completed run whose final test evaluation has these figures. */
function run(runId: string, algo: string, em: number, tc: number, known: number): AkbeEvent[] {
  const at = { runId, step: 0, policyVersion: 1 };
  return [
    createEvent(
      'run.started',
      { algo, config: { algo }, seeds: { run: 0 }, worldRef: 'w', policyRef: 'p', akbeVersion: '0' },
      { ...at, policyVersion: 0 },
    ),
    createEvent(
      'eval.completed',
      {
        when: 'after',
        version: 1,
        split: 'test',
        questions: 10,
        em,
        tc,
        tp: em / tc,
        noToolEm: 0,
        knownSearchRate: known,
        unknownNoSearchRate: 0.5,
      },
      at,
    ),
    createEvent('run.finished', { status: 'completed', stepsCompleted: 1, elapsedSeconds: 1 }, at),
  ];
}

type Check = { ok(pass: boolean, message: string): void };
const near = (t: Check, got: number | null | undefined, want: number, what: string) =>
  t.ok(got !== null && got !== undefined && Math.abs(got - want) <= 1e-9, `${what}: ${got} vs ${want}`);

t.test('the claims of a 2 x 3 grid equal the hand-worked tests of its events', async (t) => {
  const spec = await parseSpec(SPEC, 'claims.yaml');
  // seed:          0    1    2
  // grpo EM      0.4  0.5  0.6   TC 2.0 2.5 3.0   known 0.9 1.0 0.8
  // akbe EM      0.6  0.8  0.7   TC 1.0 2.0 1.5   known 0.1 0.2 0.3
  const figs: Array<[string, string, number, number, number]> = [
    ['claims-grpo-s0', 'grpo', 0.4, 2, 0.9],
    ['claims-grpo-s1', 'grpo', 0.5, 2.5, 1],
    ['claims-grpo-s2', 'grpo', 0.6, 3, 0.8],
    ['claims-akbe-s0', 'akbe', 0.6, 1, 0.1],
    ['claims-akbe-s1', 'akbe', 0.8, 2, 0.2],
    ['claims-akbe-s2', 'akbe', 0.7, 1.5, 0.3],
  ];
  const figures = new Map<string, RunFigures>(
    figs.map(([id, algo, em, tc, known]) => [id, fold(runFigures, run(id, algo, em, tc, known))]),
  );
  const r = buildReport(spec, planRuns(spec), figures);
  const [em, tc, known] = r.claims;

  // EM, paired (declared): d = 0.2, 0.3, 0.1 -> mean 0.2, s^2 0.01, se = sqrt(0.01/3) = 0.0577350,
  // t = 0.2 / se = 2 sqrt 3 = 3.4641016, df 2; p = 1 - sqrt(t^2 / (t^2 + 2)) = 1 - sqrt(6/7) = 0.0741799.
  t.equal(em.primary?.test, 'paired');
  near(t, em.primary?.t, 2 * Math.sqrt(3), 'EM paired t');
  near(t, em.primary?.p, 1 - Math.sqrt(6 / 7), 'EM paired p');
  // MDE = (t(0.975, 2) + t(0.8, 2)) se = (4.3026527 + 1.0606602) * 0.0577350 = 0.3096510
  near(t, em.primary?.mde, (4.302652729749 + 0.6 / Math.sqrt(0.32)) * Math.sqrt(0.01 / 3), 'EM MDE');
  // EM, Welch beside it: means 0.7 - 0.5 = 0.2, se^2 = 0.01/3 + 0.01/3, t = sqrt 6, df = 4 exactly;
  // p = 1 - sqrt(x) (1 + (1 - x)/2), x = 6/10: 1 - 0.7745967 * 1.2 = 0.0704840.
  t.equal(em.other?.test, 'welch');
  near(t, em.other?.df, 4, 'EM Welch df');
  near(t, em.other?.p, 1 - Math.sqrt(0.6) * 1.2, 'EM Welch p');

  // TC, Welch: means 1.5 - 2.5 = -1, s^2 0.25 each, se^2 = 2 * 0.25/3 = 1/6, t = -sqrt 6, df 4: p 0.0704840.
  near(t, tc.primary?.estimate, -1, 'TC difference');
  near(t, tc.primary?.p, 1 - Math.sqrt(0.6) * 1.2, 'TC Welch p');
  // known-search, Welch: 0.2 - 0.9 = -0.7, se^2 = 0.02/3, t^2 = 0.49 / (0.02/3) = 73.5, df 4:
  // x = 73.5 / 77.5, p = 1 - sqrt(x) (1 + (1 - x)/2) = 0.0010166626.
  const x = 73.5 / 77.5;
  near(t, known.primary?.p, 1 - Math.sqrt(x) * (1 + (1 - x) / 2), 'known-search p');

  // Holm over the three: ascending 0.0010167 (x3), 0.0704840 (x2), 0.0741799 (x1):
  //   0.0030500, 0.1409680, max(0.1409680, 0.0741799) = 0.1409680
  const pKnown = 1 - Math.sqrt(x) * (1 + (1 - x) / 2);
  const pTc = 1 - Math.sqrt(0.6) * 1.2;
  near(t, known.pHolm, 3 * pKnown, 'known-search Holm');
  near(t, tc.pHolm, 2 * pTc, 'TC Holm');
  near(t, em.pHolm, 2 * pTc, 'EM Holm: the running max, not 1 x its own p');
  // verdicts: EM and TC not detected (Holm p > 0.05); known-search significant with the wrong sign
  t.same(
    r.claims.map((c) => c.verdict),
    ['not detected', 'not detected', 'contradicted'],
  );
  // The paired-difference table's p-values (akbe vs the baseline grpo), Holm over the report's
  // differences: train has no steps (no values) and unknown-no-search is 0.5 everywhere (no spread),
  // so the family is test EM, TC, TP and known-search (m = 4).
  //   EM d = 0.2, 0.3, 0.1 and TC d = -1, -0.5, -1.5: |t| = 2 sqrt 3, df 2, p = 1 - sqrt(6/7) each
  //   known d = -0.8, -0.8, -0.5: mean -0.7, s^2 0.03, se 0.1, t = -7: p = 1 - sqrt(49/51) = 0.0198
  //   TP (em/tc) d = 0.4, 0.2, 0.2667: t = 4.91, p = 0.039, between the two
  // Holm, ascending: known x4, TP x3, EM and TC x2 and x1 -> EM's and TC's adjusted p = 2 (1 - sqrt(6/7))
  const testAkbe = r.splits.find((s) => s.split === 'test')!.cells[1];
  const pKnownPaired = 1 - Math.sqrt(49 / 51);
  near(t, testAkbe.diffP?.knownSearchRate?.p, pKnownPaired, 'known-search paired p');
  near(t, testAkbe.diffP?.knownSearchRate?.pHolm, 4 * pKnownPaired, 'known-search Holm (m = 4)');
  near(t, testAkbe.diffP?.em?.pHolm, 2 * (1 - Math.sqrt(6 / 7)), 'EM Holm');
  near(t, testAkbe.diffP?.tc?.pHolm, 2 * (1 - Math.sqrt(6 / 7)), 'TC Holm: the running max');
  t.equal(testAkbe.diffP?.unknownNoSearchRate?.p, null, 'no spread: no test');
  const md = reportFiles(r).get('README.md')!;
  t.match(md, /\| akbe \| 3 \| \+0\.200 ± 0\.248 \(p 0\.0742, Holm 0\.148\) \|/);
  t.match(md, /## Claims/);
  t.match(md, /\| AKBE raises test EM \| EM \| test \| akbe − grpo \| > 0 \| paired: \+0\.200 \[/);
  t.match(md, /not detected \(MDE 0\.310\) \|/);
  t.match(md, /\| contradicted \|/);
  // the per-cell plot of test EM: 2 means, 2 intervals, 6 seed dots
  const svg = reportFiles(r).get('cells-test-em.svg')!;
  t.equal(svg.match(/class="seed"/g)?.length, 6);
  t.equal(svg.match(/class="interval"/g)?.length, 2);
});

t.test('a bad claim names the spec file and the key', async (t) => {
  const bad = async (claim: string, key: RegExp) => {
    const text = `name: c\nseeds: [0]\ngrid:\n  - algo: grpo\n  - algo: akbe\nclaims:\n  - ${claim}\n`;
    await t.rejects(parseSpec(text, 'c.yaml'), SpecError);
    await t.rejects(parseSpec(text, 'c.yaml'), { message: key });
  };
  await bad(
    '{ claim: x, metric: f1, split: test, direction: less, cells: [akbe, grpo] }',
    /c\.yaml: claims\[0\]\.metric: must be one of em/,
  );
  await bad(
    '{ claim: x, metric: em, split: test, direction: up, cells: [akbe, grpo] }',
    /claims\[0\]\.direction/,
  );
  await bad(
    '{ claim: x, metric: em, split: test, direction: less, cells: [akbe, ppo] }',
    /claims\[0\]\.cells: names no cell: "ppo"/,
  );
  await bad(
    '{ claim: x, metric: em, split: test, direction: less, cells: [akbe, grpo], test: z }',
    /claims\[0\]\.test/,
  );
  await bad(
    '{ claim: x, metric: em, split: test, direction: less, cells: [akbe, grpo], n: 3 }',
    /claims\[0\]\.n: unknown key/,
  );
});
