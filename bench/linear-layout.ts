/**
 * The nn.Linear weight layout in the graphs (issue 14 item 5): a weight kept in the checkpoint's
 * [out, in] layout costs y = x @ W^T; the question is whether the transpose costs time. One
 * projection of Qwen3-0.6B's MLP (W [3072, 1024], a graph input as the policy's weights are) at
 * the decode shape x [B, 1, 1024], B = 1 and 16, three ways, in one process:
 *   matmul-t   MatMul(x, Transpose(W))            what llama.ts builds (ORT may fuse the Transpose)
 *   gemm-tb    Gemm(reshape(x, [B, 1024]), W, transB=1)   the layout kept, the transpose in the GEMM
 *   matmul-io  MatMul(x, W') with W' = W^T given as [1024, 3072]   the [in, out] layout (baseline)
 * Median ms per run over --runs runs; ratio to matmul-io.
 *
 *   npm run build && node dist/bench/linear-layout.js [--runs 200] [--threads 1]
 */
import { parseArgs } from 'node:util';
import { Graph, ops } from '../src/gpu/graph/index.js';
import { createSession, loadOrt } from '../src/gpu/session.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: { runs: { type: 'string', default: '200' }, threads: { type: 'string', default: '1' } },
});
const [OUT, IN] = [3072, 1024];
const ort = await loadOrt();
const w = Float32Array.from({ length: OUT * IN }, (_, i) => (((i * 2654435761) >>> 0) % 1000) / 1000 - 0.5);
const wT = new Float32Array(OUT * IN);
for (let o = 0; o < OUT; o++) for (let i = 0; i < IN; i++) wT[i * OUT + o] = w[o * IN + i];

async function time(kind: 'matmul-t' | 'gemm-tb' | 'matmul-io', B: number): Promise<number> {
  const g = new Graph({ name: kind });
  const x = g.input('x', 'float32', [B, 1, IN]);
  const W = g.input('w', 'float32', kind === 'matmul-io' ? [IN, OUT] : [OUT, IN]);
  const y =
    kind === 'matmul-t'
      ? ops.matmul(x, ops.transpose(W, [1, 0]))
      : kind === 'gemm-tb'
        ? ops.reshape(ops.gemm(ops.reshape(x, [B, IN]), W, null, { transB: true }), [B, 1, OUT])
        : ops.matmul(x, W);
  g.output(y, 'y');
  const { session } = await createSession(g.serialize(), { intraOpThreads: Number(flags.threads) });
  const feeds = {
    x: new ort.Tensor('float32', new Float32Array(B * IN).fill(0.01), [B, 1, IN]),
    w: new ort.Tensor('float32', kind === 'matmul-io' ? wT : w, kind === 'matmul-io' ? [IN, OUT] : [OUT, IN]),
  };
  for (let i = 0; i < 10; i++) await session.run(feeds);
  const ms: number[] = [];
  for (let i = 0; i < Number(flags.runs); i++) {
    const t0 = performance.now();
    await session.run(feeds);
    ms.push(performance.now() - t0);
  }
  await session.release();
  return median(ms);
}

for (const B of [1, 16]) {
  // Interleaved so that load changes hit all three alike.
  const got = { 'matmul-t': [] as number[], 'gemm-tb': [] as number[], 'matmul-io': [] as number[] };
  for (let r = 0; r < 3; r++)
    for (const k of Object.keys(got) as Array<keyof typeof got>) got[k].push(await time(k, B));
  const base = median(got['matmul-io']);
  for (const [k, v] of Object.entries(got))
    process.stdout.write(
      `B=${B} ${k.padEnd(9)} ${median(v).toFixed(3)} ms (x${(median(v) / base).toFixed(2)} of matmul-io)\n`,
    );
}
