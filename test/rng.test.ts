import t from 'tap';
import { deriveSeed, Rng } from '../src/util/rng.js';

t.test('same seed gives the same stream, different seeds differ', async (t) => {
  const a = new Rng(7);
  const b = new Rng(7);
  const c = new Rng(8);
  const sa = Array.from({ length: 8 }, () => a.u32());
  t.same(
    sa,
    Array.from({ length: 8 }, () => b.u32()),
  );
  t.not(JSON.stringify(sa), JSON.stringify(Array.from({ length: 8 }, () => c.u32())));
});

t.test('deriveSeed depends on every part and its order', async (t) => {
  const base = deriveSeed(1, 'rollout', 3, 'q7', 0);
  t.equal(base, deriveSeed(1, 'rollout', 3, 'q7', 0));
  t.not(base, deriveSeed(1, 'rollout', 3, 'q7', 1));
  t.not(base, deriveSeed(1, 'rollout', 'q7', 3, 0));
  t.not(deriveSeed(1, 2 ** 40), deriveSeed(1, 0));
});

t.test('float is in [0,1) with mean near 1/2; int(n) is unbiased enough', async (t) => {
  const r = new Rng(123);
  let sum = 0;
  const counts = new Array(5).fill(0);
  let outOfRange = 0;
  for (let i = 0; i < 50_000; i++) {
    const x = r.float();
    if (!(x >= 0 && x < 1)) outOfRange++;
    sum += x;
    counts[r.int(5)]++;
  }
  t.equal(outOfRange, 0);
  t.ok(Math.abs(sum / 50_000 - 0.5) < 0.01, `mean ${sum / 50_000}`);
  for (const c of counts) t.ok(Math.abs(c / 50_000 - 0.2) < 0.01, `bucket share ${c / 50_000}`);
  t.throws(() => r.int(0), /n must be an integer/);
});

t.test('shuffle is a permutation and pick takes a member', async (t) => {
  const r = new Rng(5);
  const xs = r.shuffle([1, 2, 3, 4, 5, 6, 7, 8]);
  t.same([...xs].sort(), [1, 2, 3, 4, 5, 6, 7, 8]);
  t.ok(xs.includes(r.pick(xs)));
  t.throws(() => r.pick([]), /empty list/);
});
