/**
 * `recomputeOldLogprobs` (src/train/train-loop.ts): the old logprobs of re-conditioned AKBE
 * rows under the clipped loss. First its row and token indexing on a hand-built batch with
 * hand-chosen logprobs; then a real clipped-AKBE step through the trainer service on a private
 * nats-server, where the first update's ratio must be exactly 1 on every loss token: the clipped
 * AKBE loss of a ratio-1 token is max(-1, -clip(1)) = -1, so akbeLoss is -1 only if every old
 * logprob of the target row was recomputed at the right place.
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
import { recomputeOldLogprobs } from '../src/train/train-loop.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

/**
 * 3 rows, T = 6 (so [B, T-1] arrays have 5 columns):
 *   row 0: a GRPO row with recorded logprobs (recomputeOld 0): must be left alone;
 *   row 1: re-conditioned, length 5 (prompt 2, response 3 -> loss positions 1, 2, 3), one pad;
 *   row 2: re-conditioned, length 6 (prompt 3, response 3 -> loss positions 2, 3, 4).
 */
function handBatch(): TrainBatch {
  const row = (questionId: string, path: 'with-tool' | 'no-tool', promptLength: number, length: number) => ({
    questionId,
    rolloutId: `${questionId}-${path}`,
    path,
    context: 'with-tool' as const,
    promptLength,
    length,
  });
  return {
    rows: 3,
    T: 6,
    // biome-ignore format: one row per line
    inputIds: Int32Array.from([
      5, 6, 7, 8, 9, 10,
      11, 12, 13, 14, 15, 0,
      16, 17, 18, 19, 20, 21,
    ]),
    // biome-ignore format: one row per line
    lossMask: Float32Array.from([
      0, 1, 1, 1, 1,
      0, 1, 1, 1, 0,
      0, 0, 1, 1, 1,
    ]),
    // biome-ignore format: one row per line
    oldLogprobs: Float32Array.from([
      0, -0.5, -0.25, -0.125, -1,
      0, 0, 0, 0, 0,
      0, 0, 0, 0, 0,
    ]),
    advantages: Float32Array.from([1, 0, 0]),
    pgWeight: Float32Array.from([1, 0, 0]),
    akbeWeight: Float32Array.from([0, 1 / 6, 1 / 6]), // per-target: 1 / (2 targets * 3 tokens)
    recomputeOld: Uint8Array.from([0, 1, 1]),
    rowInfo: [row('q0', 'with-tool', 1, 6), row('q1', 'no-tool', 2, 5), row('q2', 'no-tool', 3, 6)],
    miniBatches: [[0, 1, 2]],
    lossTokens: 10,
  };
}

t.test('recomputeOldLogprobs: which rows, which tokens, and where their logprobs land', async (t) => {
  const b = handBatch();
  const asked: number[][][] = [];
  // Logprob t of sequence i is -(i + 1) - t / 10: each value says which sequence and token it is.
  await recomputeOldLogprobs(b, async (seqs) => {
    asked.push(seqs);
    return seqs.map((s, i) => s.slice(1).map((_, tok) => -(i + 1) - tok / 10));
  });
  t.same(
    asked,
    [
      [
        [11, 12, 13, 14, 15],
        [16, 17, 18, 19, 20, 21],
      ],
    ],
    'one call: the re-conditioned rows, unpadded, in row order',
  );
  // biome-ignore format: one row per line
  const want = [
    0, -0.5, -0.25, -0.125, -1,     // row 0 untouched
    0, -1.1, -1.2, -1.3, 0,         // row 1: sequence 0's logprobs 1..3 (positions 0 and 4 are not loss tokens)
    0, 0, -2.2, -2.3, -2.4,         // row 2: sequence 1's logprobs 2..4
  ];
  t.same(
    Array.from(b.oldLogprobs, (x) => Math.round(x * 1e6) / 1e6),
    want,
  );

  const none = handBatch();
  none.recomputeOld.fill(0);
  let calls = 0;
  await recomputeOldLogprobs(none, async () => {
    calls++;
    return [];
  });
  t.equal(calls, 0, 'no re-conditioned row: the policy is not asked');
  t.same(Array.from(none.oldLogprobs), Array.from(handBatch().oldLogprobs));
});

t.test(
  'a clipped-AKBE step through the trainer service starts at ratio 1 on the re-conditioned rows',
  async (t) => {
    const fx = await tinyRunFixture();
    const nats = await withNats(t);
    const runId = 'recompute';
    const spec = tinySpec(fx, { akbeLossForm: 'clipped', lambda: 1 });
    const checkpoints = await CheckpointStore.open(
      nats.nc,
      runId,
      join(mkdtempSync(join(tmpdir(), 'akbe-rc-')), 'ck'),
    );
    await checkpoints.importBase(fx.policyDir);
    const policy = await startPolicyHandle(checkpoints, spec, 0, { threads: 1 });
    const service = new TrainerService(nats.nc, runId, policy, checkpoints);
    t.teardown(async () => {
      await service.stop();
      await policy.host.close();
    });

    const vocab = policy.vocabSize ?? 0;
    t.ok(vocab > 21, 'the hand-built token ids are in the tiny vocabulary');
    const b = handBatch();
    // Row 0 gets its true old logprobs (so its ratio is 1 too); rows 1 and 2 keep zeros.
    const [row0] = await policy.host.logprobs([Array.from(b.inputIds.subarray(0, 6))]);
    row0.forEach((lp, t) => {
      b.oldLogprobs[t] = b.lossMask[t] === 1 ? lp : 0;
    });
    const reply = await requestTrain(
      nats.nc,
      runId,
      {
        step: 0,
        policyVersion: 0,
        batch: b,
        losses: lossTermsFor({ algo: 'akbe', akbeLossForm: 'clipped', lambda: 1, clipEps: 0.2 }),
        lr: 1e-3,
        epochs: 1,
        rowsPerUpdate: 3,
        padId: 0,
      },
      { timeoutMs: 120_000 },
    );
    t.equal(reply.version, 1);
    t.equal(reply.metrics.updates, 1);
    // Without the recomputation the old logprobs of rows 1-2 are 0: r = p(token) < 0.8 and the loss
    // is -mean(r) > -0.8; one misplaced logprob moves it off -1 as well.
    t.ok(Math.abs(reply.metrics.akbeLoss - -1) < 1e-5, `akbeLoss ${reply.metrics.akbeLoss} is -1 (ratio 1)`);
    t.ok(Math.abs(reply.metrics.approxKl) < 1e-6, `approxKl ${reply.metrics.approxKl} is 0 on the GRPO row`);
    t.equal(reply.metrics.clipFrac, 0);
  },
);
