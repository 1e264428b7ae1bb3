/**
 * The decoupled objective wired into the trainer service (issue 13 item 2): with maxStaleness >= 1
 * the service computes log pi_prox of every row with version k before the first update
 * (`proxLogprobsOf`) and its policy's trainer is decoupled (weight pi_prox / pi_behav capped at
 * behaviourWeightCap). Checked: the indexing on a hand-built batch; fresh rows (pi_behav = pi_prox)
 * train exactly as the synchronous service does; rows whose behaviour logprobs sit delta below
 * pi_prox on every token weigh e^delta (at the first update, ratio 1: pgLoss = e^delta x the fresh
 * pgLoss), and above the cap they weigh 0.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CheckpointStore } from '../src/actors/checkpoints/checkpoints.js';
import { startPolicyHandle } from '../src/actors/roles/roles.js';
import { requestTrain, TrainerService } from '../src/actors/services/trainer/trainer-service.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import type { TrainBatch } from '../src/rl/batch.js';
import { proxLogprobsOf } from '../src/train/train-loop.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

/** 2 GRPO rows, T = 6: row 0 length 6 (loss positions 1..4), row 1 length 5 (loss 2..3), one pad. */
function handBatch(): TrainBatch {
  const row = (questionId: string, promptLength: number, length: number) => ({
    questionId,
    rolloutId: `${questionId}.wt0`,
    path: 'with-tool' as const,
    context: 'with-tool' as const,
    promptLength,
    length,
  });
  return {
    rows: 2,
    T: 6,
    // biome-ignore format: one row per line
    inputIds: Int32Array.from([
      5, 6, 7, 8, 9, 10,
      11, 12, 13, 14, 15, 0,
    ]),
    // biome-ignore format: one row per line
    lossMask: Float32Array.from([
      0, 1, 1, 1, 1,
      0, 0, 1, 1, 0,
    ]),
    oldLogprobs: new Float32Array(10),
    advantages: Float32Array.from([1, 1]),
    pgWeight: Float32Array.from([1, 1]),
    akbeWeight: Float32Array.from([0, 0]),
    recomputeOld: Uint8Array.from([0, 0]),
    rowInfo: [row('q0', 1, 6), row('q1', 2, 5)],
    miniBatches: [[0, 1]],
    lossTokens: 6,
  };
}

t.test('proxLogprobsOf: every row asked once, unpadded; values on loss positions only', async (t) => {
  const b = handBatch();
  const asked: number[][][] = [];
  const prox = await proxLogprobsOf(b, async (seqs) => {
    asked.push(seqs);
    return seqs.map((s, i) => s.slice(1).map((_, tok) => -(i + 1) - tok / 10));
  });
  t.same(asked, [
    [
      [5, 6, 7, 8, 9, 10],
      [11, 12, 13, 14, 15],
    ],
  ]);
  // biome-ignore format: one row per line
  t.same(Array.from(prox, (x) => Math.round(x * 1e6) / 1e6), [
    0, -1.1, -1.2, -1.3, -1.4,
    0, 0, -2.2, -2.3, 0,
  ]);
  t.same(Array.from(b.oldLogprobs), new Array(10).fill(0), 'oldLogprobs (pi_behav) untouched');
});

t.test(
  'the trainer service, decoupled: fresh rows train as today, stale rows weigh e^delta up to the cap',
  async (t) => {
    const fx = await tinyRunFixture();
    const nats = await withNats(t);
    const losses = lossTermsFor({ algo: 'grpo', clipEps: 0.2, akbeLossForm: 'nll', lambda: 0 });
    const service = async (runId: string, maxStaleness: number) => {
      const spec = tinySpec(fx, { maxStaleness, behaviourWeightCap: 5 });
      const checkpoints = await CheckpointStore.open(
        nats.nc,
        runId,
        join(mkdtempSync(join(tmpdir(), 'akbe-dc-')), 'ck'),
      );
      await checkpoints.importBase(fx.policyDir);
      const policy = await startPolicyHandle(checkpoints, spec, 0, { threads: 1 });
      const decoupled = maxStaleness > 0 ? { behaviourWeightCap: spec.train.behaviourWeightCap } : undefined;
      const s = new TrainerService(nats.nc, runId, policy, checkpoints, decoupled);
      t.teardown(async () => {
        await s.stop();
        await policy.host.close();
      });
      return policy;
    };
    const train = (runId: string, batch: TrainBatch) =>
      requestTrain(
        nats.nc,
        runId,
        { step: 0, policyVersion: 0, batch, losses, lr: 1e-3, epochs: 1, rowsPerUpdate: 2, padId: 0 },
        { timeoutMs: 120_000 },
      );
    const sync = await service('dc-sync', 0);
    // pi_behav = v0's own logprobs (what a fresh rollout records), shifted by delta per token.
    const v0 = await sync.host.logprobs([
      [5, 6, 7, 8, 9, 10],
      [11, 12, 13, 14, 15],
    ]);
    const behaved = (delta: number) => {
      const b = handBatch();
      for (const [r, lps] of v0.entries())
        for (const [tok, lp] of lps.entries())
          if (b.lossMask[r * 5 + tok] === 1) b.oldLogprobs[r * 5 + tok] = lp - delta;
      return b;
    };
    const today = await train('dc-sync', behaved(0));
    t.ok(
      Math.abs(today.metrics.pgLoss) > 0.5,
      `the synchronous loss is not trivially 0 (${today.metrics.pgLoss})`,
    );
    await service('dc-fresh', 1);
    const fresh = await train('dc-fresh', behaved(0));
    for (const k of ['loss', 'pgLoss', 'gradNorm', 'approxKl', 'clipFrac'])
      t.equal(fresh.metrics[k], today.metrics[k], `fresh rows: decoupled ${k} is today's`);
    await service('dc-stale', 1);
    const stale = await train('dc-stale', behaved(0.5));
    const want = Math.exp(0.5) * today.metrics.pgLoss;
    t.ok(
      Math.abs(stale.metrics.pgLoss - want) < 1e-5 * Math.abs(want),
      `stale rows by 0.5 nats: pgLoss ${stale.metrics.pgLoss} = e^0.5 x ${today.metrics.pgLoss}`,
    );
    await service('dc-capped', 1);
    const capped = await train('dc-capped', behaved(Math.log(6)));
    t.ok(
      Math.abs(capped.metrics.pgLoss) < 1e-9,
      `weight 6 > cap 5: every token dropped (${capped.metrics.pgLoss})`,
    );
  },
);
