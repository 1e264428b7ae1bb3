import t from 'tap';
import { assembleBatch, type BatchQuestion } from '../src/rl/batch.js';
import { sliceMiniBatch } from '../src/rl/mini-batch.js';
import type { BoundaryLabel, QuestionGroup } from '../src/rl/types.js';
import { group, rollout } from './helpers/rollouts.js';

const f32 = (xs: number[]) => Array.from(Float32Array.from(xs));
const rowOf = (a: ArrayLike<number>, b: number, width: number) =>
  Array.from(a).slice(b * width, (b + 1) * width);

// q1: with-tool prompt [1,2]; wt0 = g g o o g (two observation tokens), wt1 = g g; nt0 = g g g under the no-tool prompt [3,4,5].
function q1(): QuestionGroup {
  return {
    questionId: 'q1',
    step: 0,
    policyVersion: 0,
    gold: ['x'],
    withToolPrompt: [1, 2],
    withTool: [
      rollout({ index: 0, reward: 1, layout: 'ggoog', toolCalls: 1 }),
      rollout({ index: 1, reward: 0, layout: 'gg' }),
    ],
    noTool: [rollout({ index: 0, reward: 1, path: 'no-tool', layout: 'ggg' })],
  };
}
const efficiency = (context: 'with-tool' | 'no-tool'): BoundaryLabel => ({
  questionId: 'q1',
  wt: true,
  nt: true,
  category: 'efficiency',
  target: { rolloutId: 'q1.nt0', path: 'no-tool', context, candidates: 1 },
  tieBreakSeed: 0,
});

t.test(
  'hand-worked layout: prompt, observation and padding masked; logprobs aligned to the mask',
  async (t) => {
    const q: BatchQuestion = { group: q1(), label: efficiency('with-tool'), advantages: [0.7, -0.7] };
    const b = assembleBatch([q], { rowKinds: ['akbe-target'], miniBatchQuestions: 1, padId: 0 });
    t.equal(b.rows, 3);
    t.equal(b.T, 7);
    t.same(rowOf(b.inputIds, 0, 7), [1, 2, 100, 101, 102, 103, 104]);
    t.same(rowOf(b.inputIds, 1, 7), [1, 2, 110, 111, 0, 0, 0]);
    t.same(
      rowOf(b.inputIds, 2, 7),
      [1, 2, 200, 201, 202, 0, 0],
      'no-tool target re-conditioned on the with-tool prompt',
    );
    // lossMask[b, t] = 1 iff tokens[b, t+1] was generated.
    t.same(rowOf(b.lossMask, 0, 6), [0, 1, 1, 0, 0, 1]);
    t.same(rowOf(b.lossMask, 1, 6), [0, 1, 1, 0, 0, 0]);
    t.same(rowOf(b.lossMask, 2, 6), [0, 1, 1, 1, 0, 0]);
    t.same(rowOf(b.oldLogprobs, 0, 6), f32([0, -0.1, -0.2, 0, 0, -0.5]));
    t.same(rowOf(b.oldLogprobs, 1, 6), f32([0, -0.1, -0.2, 0, 0, 0]));
    t.same(rowOf(b.oldLogprobs, 2, 6), [0, 0, 0, 0, 0, 0], 'recorded under another prompt: not pi_old here');
    t.same(Array.from(b.recomputeOld), [0, 0, 1]);
    t.same(Array.from(b.advantages), f32([0.7, -0.7, 0]));
    t.same(Array.from(b.pgWeight), [1, 1, 0]);
    t.same(
      Array.from(b.akbeWeight),
      [0, 0, f32([1 / 3])[0]],
      'the target alone in its mini-batch: 1 / its 3 tokens',
    );
    t.equal(b.lossTokens, 3 + 2 + 3);
    t.same(
      b.rowInfo.map((r) => [r.rolloutId, r.context]),
      [
        ['q1.wt0', 'with-tool'],
        ['q1.wt1', 'with-tool'],
        ['q1.nt0', 'with-tool'],
      ],
    );
  },
);

t.test('a no-tool target in its own context keeps its prompt and recorded logprobs', async (t) => {
  const b = assembleBatch([{ group: q1(), label: efficiency('no-tool'), advantages: [0, 0] }], {
    rowKinds: ['akbe-target'],
    miniBatchQuestions: 1,
  });
  t.same(rowOf(b.inputIds, 2, 7), [3, 4, 5, 200, 201, 202, 0]);
  t.same(rowOf(b.lossMask, 2, 6), [0, 0, 1, 1, 1, 0]);
  t.same(rowOf(b.oldLogprobs, 2, 6), f32([0, 0, -0.1, -0.2, -0.3, 0]));
  t.same(Array.from(b.recomputeOld), [0, 0, 0]);
});

t.test('a tool-dependent target is its with-tool row with an AKBE weight, no extra row', async (t) => {
  const label: BoundaryLabel = {
    questionId: 'q1',
    wt: true,
    nt: false,
    category: 'tool-dependent',
    target: { rolloutId: 'q1.wt0', path: 'with-tool', context: 'with-tool', candidates: 1 },
    tieBreakSeed: 0,
  };
  const b = assembleBatch([{ group: q1(), label, advantages: [1, -1] }], {
    rowKinds: ['akbe-target'],
    miniBatchQuestions: 1,
  });
  t.equal(b.rows, 2);
  t.same(Array.from(b.akbeWeight), [f32([1 / 3])[0], 0], 'its 3 generated tokens (observations excluded)');
  t.same(Array.from(b.pgWeight), [1, 1]);
});

t.test('algo grpo ignores targets; both-wrong adds nothing', async (t) => {
  const g = assembleBatch([{ group: q1(), label: efficiency('with-tool'), advantages: [0, 0] }], {
    rowKinds: [],
    miniBatchQuestions: 1,
  });
  t.equal(g.rows, 2);
  t.same(Array.from(g.akbeWeight), [0, 0]);
});

t.test('mini-batches hold the rows of M consecutive questions', async (t) => {
  const qs: BatchQuestion[] = ['a', 'b', 'c'].map((q) => ({
    group: group(q, [1, 0], [0]),
    label: null,
    advantages: [1, -1],
  }));
  const b = assembleBatch(qs, { rowKinds: ['akbe-target'], miniBatchQuestions: 2 });
  t.same(b.miniBatches, [
    [0, 1, 2, 3],
    [4, 5],
  ]);
  t.same(
    b.rowInfo.map((r) => r.questionId),
    ['a', 'a', 'b', 'b', 'c', 'c'],
  );
});

t.test('padTo fixes T and rejects longer rows; broken rollouts are rejected', async (t) => {
  const q: BatchQuestion = { group: q1(), label: null, advantages: [0, 0] };
  t.equal(assembleBatch([q], { rowKinds: [], miniBatchQuestions: 1, padTo: 10 }).T, 10);
  t.throws(() => assembleBatch([q], { rowKinds: [], miniBatchQuestions: 1, padTo: 6 }), {
    name: 'RolloutShapeError',
  });
  const broken = q1();
  broken.withTool[0].responseLogprobs.pop();
  t.throws(
    () =>
      assembleBatch([{ group: broken, label: null, advantages: [0, 0] }], {
        rowKinds: [],
        miniBatchQuestions: 1,
      }),
    { name: 'RolloutShapeError' },
  );
  t.throws(
    () =>
      assembleBatch([{ group: q1(), label: null, advantages: [0] }], { rowKinds: [], miniBatchQuestions: 1 }),
    { name: 'RolloutShapeError' },
  );
});

t.test(
  'sliceMiniBatch copies the rows of a mini-batch and pads with empty rows for a fixed-B graph',
  async (t) => {
    const qs: BatchQuestion[] = ['a', 'b', 'c'].map((q) => ({
      group: group(q, [1, 0], [0]),
      label: null,
      advantages: [1, -1],
    }));
    const b = assembleBatch(qs, { rowKinds: ['akbe-target'], miniBatchQuestions: 2 });
    const last = sliceMiniBatch(b, 1, { padRowsTo: 4 });
    t.equal(last.rows, 4);
    t.equal(last.paddingRows, 2);
    t.same(rowOf(last.inputIds, 0, b.T), rowOf(b.inputIds, 4, b.T));
    t.same(rowOf(last.lossMask, 1, b.T - 1), rowOf(b.lossMask, 5, b.T - 1));
    t.same(Array.from(last.advantages), [1, -1, 0, 0]);
    t.same(Array.from(last.pgWeight), [1, 1, 0, 0]);
    t.same(rowOf(last.lossMask, 3, b.T - 1), Array(b.T - 1).fill(0));
    t.equal(last.proxLogprobs, undefined, 'no proximal logprobs unless the batch has them');
    // The decoupled objective's proximal logprobs travel with their rows (0 on padding rows).
    const prox = Float32Array.from({ length: b.rows * (b.T - 1) }, (_, i) => -(i + 1));
    const withProx = sliceMiniBatch({ ...b, proxLogprobs: prox }, 1, { padRowsTo: 4 });
    t.same(rowOf(withProx.proxLogprobs!, 0, b.T - 1), rowOf(prox, 4, b.T - 1));
    t.same(rowOf(withProx.proxLogprobs!, 1, b.T - 1), rowOf(prox, 5, b.T - 1));
    t.same(rowOf(withProx.proxLogprobs!, 2, b.T - 1), Array(b.T - 1).fill(0));
    t.throws(() => sliceMiniBatch(b, 0, { padRowsTo: 3 }), RangeError);
    t.throws(() => sliceMiniBatch(b, 2), RangeError);
  },
);

t.test('sizes, boundaries and messages (found by mutation testing)', async (t) => {
  const q: BatchQuestion = { group: q1(), label: efficiency('with-tool'), advantages: [0.7, -0.7] };
  const b = assembleBatch([q], { rowKinds: ['akbe-target'], miniBatchQuestions: 1, padTo: 7 });
  t.same([b.inputIds.length, b.lossMask.length, b.oldLogprobs.length], [21, 18, 18], 'B x T and B x (T - 1)');
  t.same(
    b.rowInfo.map((r) => [r.promptLength, r.length]),
    [
      [2, 7],
      [2, 4],
      [2, 5],
    ],
  );
  const err = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return `${(e as Error).name}: ${(e as Error).message}`;
    }
    return 'accepted';
  };
  t.equal(
    err(() => assembleBatch([q], { rowKinds: ['akbe-target'], miniBatchQuestions: 1, padTo: 6 })),
    'RolloutShapeError: row q1.wt0 has 7 tokens, more than padTo = 6',
  );
  for (const M of [0, 1.5])
    t.equal(
      err(() => assembleBatch([q], { rowKinds: ['akbe-target'], miniBatchQuestions: M })),
      `RangeError: assembleBatch: miniBatchQuestions must be an integer >= 1, got ${M}`,
    );
  const broken = q1();
  broken.withTool[1].responseMask.pop();
  t.equal(
    err(() =>
      assembleBatch([{ group: broken, label: null, advantages: [0, 0] }], {
        rowKinds: [],
        miniBatchQuestions: 1,
      }),
    ),
    'RolloutShapeError: rollout q1.wt1: 2 response tokens but 2 logprobs and 1 mask entries',
  );
  t.equal(
    err(() =>
      assembleBatch([{ group: q1(), label: null, advantages: [0] }], { rowKinds: [], miniBatchQuestions: 1 }),
    ),
    'RolloutShapeError: question q1: 1 advantages for 2 with-tool rollouts',
  );

  // A mini-batch of every row, padded to exactly its size, is the batch itself.
  const all = sliceMiniBatch(b, 0, { padRowsTo: 3 });
  t.equal(all.paddingRows, 0);
  for (const k of [
    'inputIds',
    'lossMask',
    'oldLogprobs',
    'advantages',
    'pgWeight',
    'akbeWeight',
    'recomputeOld',
  ] as const)
    t.same(Array.from(all[k]), Array.from(b[k]), k);
  t.equal(
    err(() => sliceMiniBatch(b, 1)),
    'RangeError: sliceMiniBatch: no mini-batch 1 (the batch has 1)',
  );
  t.equal(
    err(() => sliceMiniBatch(b, 0, { padRowsTo: 2 })),
    'RangeError: sliceMiniBatch: mini-batch 0 has 3 rows, more than padRowsTo = 2',
  );
  // Rows picked out of the middle keep their own logprobs (row 1 of a 3-question batch).
  const three = assembleBatch(
    ['a', 'b', 'c'].map((id) => ({ group: { ...q1(), questionId: id }, label: null, advantages: [1, -1] })),
    { rowKinds: [], miniBatchQuestions: 1 },
  );
  const mid = sliceMiniBatch(three, 1);
  t.same(Array.from(mid.oldLogprobs), Array.from(three.oldLogprobs.subarray(2 * 6, 4 * 6)));
  t.same(Array.from(mid.lossMask), Array.from(three.lossMask.subarray(2 * 6, 4 * 6)));
});
