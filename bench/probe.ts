/**
 * Baselines the compute benchmarks share: the median of repeated measurements, and one large
 * float32 MatMul whose GFLOP/s is the machine's practical peak for ORT under the current load.
 */
import { Graph, ops } from '../src/gpu/graph/index.js';
import { createSession, loadOrt, type SessionConfig } from '../src/gpu/session.js';

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** A session running one n x n MatMul; each call times one run and returns GFLOP/s. */
export async function matmulProbe(
  n: number,
  session: SessionConfig,
): Promise<{ run: () => Promise<number>; createMs: number }> {
  const ort = await loadOrt();
  const g = new Graph({ name: 'matmul' });
  const a = g.input('a', 'float32', [n, n]);
  const b = g.input('b', 'float32', [n, n]);
  g.output(ops.matmul(a, b), 'c');
  const { session: s, createMs } = await createSession(g.serialize(), session);
  const x = new ort.Tensor(
    'float32',
    Float32Array.from({ length: n * n }, (_, i) => ((i % 7) - 3) / 8),
    [n, n],
  );
  await s.run({ a: x, b: x }); // warm-up
  return {
    createMs,
    run: async () => {
      const t0 = performance.now();
      await s.run({ a: x, b: x });
      return (2 * n ** 3) / ((performance.now() - t0) / 1000) / 1e9;
    },
  };
}
