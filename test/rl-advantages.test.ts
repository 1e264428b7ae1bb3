import t, { type Test } from 'tap';
import {
  AdvantageName,
  drGrpoAdvantages,
  getAdvantage,
  grpoAdvantages,
  listAdvantages,
  registerAdvantage,
} from '../src/rl/advantages.js';
import { Rng } from '../src/util/rng.js';

const close = (t: Test, got: number[], want: number[], tol = 1e-5) => {
  t.equal(got.length, want.length);
  for (const [i, g] of got.entries()) t.ok(Math.abs(g - want[i]) < tol, `[${i}] ${g} ≈ ${want[i]}`);
};

t.test('GRPO advantages of [1,0,0,0] are [1.5,-0.5,-0.5,-0.5] (std with ddof = 1, eps 1e-6)', async (t) => {
  close(t, grpoAdvantages([1, 0, 0, 0]), [1.5, -0.5, -0.5, -0.5]);
  // Exactly: 0.75 / (0.5 + 1e-6).
  t.equal(grpoAdvantages([1, 0, 0, 0])[0], 0.75 / (0.5 + 1e-6));
});

t.test('a group of one and a group of equal rewards get zeros', async (t) => {
  t.same(grpoAdvantages([1]), [0]);
  t.same(grpoAdvantages([]), []);
  t.same(grpoAdvantages([1, 1, 1]), [0, 0, 0]);
  t.same(grpoAdvantages([0, 0]), [0, 0]);
});

t.test('GRPO agrees with a direct two-pass reference on seeded random groups', async (t) => {
  const rng = new Rng(12345);
  const rand = () => rng.float();
  for (let trial = 0; trial < 20; trial++) {
    const n = 2 + Math.floor(rand() * 15);
    const r: number[] = Array.from({ length: n }, () => (rand() < 0.4 ? 1 : 0));
    const m = r.reduce((a, b) => a + b) / n;
    const sd = Math.sqrt(r.map((x) => (x - m) ** 2).reduce((a, b) => a + b) / (n - 1));
    close(
      t,
      grpoAdvantages(r),
      r.map((x) => (x - m) / (sd + 1e-6)),
      1e-12,
    );
  }
  close(t, drGrpoAdvantages([1, 0, 0, 0]), [0.75, -0.25, -0.25, -0.25], 1e-12);
});

t.test('the registry: lookup by name, duplicates throw, unknown names list the valid ones', async (t) => {
  t.equal(getAdvantage(AdvantageName.GRPO), grpoAdvantages);
  t.same(listAdvantages(), ['dr-grpo', 'grpo']);
  registerAdvantage('grpo', grpoAdvantages); // same function again: allowed
  t.throws(() => registerAdvantage('grpo', (r) => r.map(() => 0)), { name: 'DuplicateRegistrationError' });
  t.throws(() => getAdvantage('gae'), {
    name: 'UnknownRegistryNameError',
    message: "unknown advantage 'gae'; known: dr-grpo, grpo",
  });
});

t.test('GRPO known answers: ddof-1 std about a non-zero mean', async (t) => {
  // [1, 0, 0]: mean 1/3, squared deviations 4/9 + 1/9 + 1/9 over n - 1 = 2 -> std 1/sqrt(3).
  close(t, grpoAdvantages([1, 0, 0]), [2 / Math.sqrt(3), -1 / Math.sqrt(3), -1 / Math.sqrt(3)]);
  // [5, 3]: mean 4, std sqrt(2) -> +-1/sqrt(2), whatever the offset.
  close(t, grpoAdvantages([5, 3]), [Math.SQRT1_2, -Math.SQRT1_2]);
  t.same(grpoAdvantages([0.7]), [0], 'a group of one has no baseline');
  t.same(grpoAdvantages([]), []);
  close(t, drGrpoAdvantages([5, 3, 1]), [2, 0, -2]);
});
