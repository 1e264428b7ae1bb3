/**
 * beta-GRPO's gate reads the search query's tokens only (Wu et al. 2025 §4), not the whole turn
 * that ended in the call: hand-built rollouts where the two rules disagree, with every
 * probability written out.
 */
import t from 'tap';
import { wholeTurnSpans } from '../src/events/upcast.js';
import { searchCallConfidences } from '../src/rl/algorithms/beta-grpo.js';
import { getAlgorithm } from '../src/rl/algorithms/index.js';
import type { RolloutResult } from '../src/rl/types.js';
import { rollout } from './helpers/rollouts.js';

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

/**
 * One search then the answer, as token probabilities:
 *   0 <think>  1 reasoning  2 </think>  3 <search>  4 query  5 query  6 </search>   (turn 0)
 *   7 8 9 observation                                                               (mask 0)
 *   10 <answer>  11 x  12 </answer>                                                  (turn 1)
 * The query span is [4, 6).
 */
function searchThenAnswer(p: number[], reward = 1): RolloutResult {
  const r = rollout({ index: 0, reward, layout: 'gggggggoooggg', toolCalls: 1 });
  return {
    ...r,
    toolCallSpans: [[4, 6]],
    responseLogprobs: p.map((x, j) => (r.responseMask[j] === 1 ? Math.log(x) : 0)),
  };
}
const confident = [0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.95, 1, 1, 1, 0.9, 0.9, 0.9];
const oldRule = (r: RolloutResult) => ({ ...r, toolCallSpans: wholeTurnSpans(r.responseMask) });

t.test(
  'unsure reasoning, a confident query: the paper keeps the reward, the whole-turn rule did not',
  async (t) => {
    const beta = getAlgorithm('beta-grpo');
    const p = [...confident];
    p[1] = 0.1; // the reasoning token
    const r = searchThenAnswer(p);
    t.ok(close(searchCallConfidences(r)[0], 0.8), 'min(0.9, 0.8) over the query');
    t.strictSame(beta.rewards([r], { beta: 0.4 }), [1]);
    t.ok(close(searchCallConfidences(oldRule(r))[0], 0.1), 'the whole turn [0, 7): 0.1');
    t.strictSame(beta.rewards([oldRule(r)], { beta: 0.4 }), [0]);
    // The tags are not the query either: an unsure `</search>` does not gate.
    const q = [...confident];
    q[6] = 0.05;
    t.strictSame(beta.rewards([searchThenAnswer(q)], { beta: 0.4 }), [1]);
    t.strictSame(beta.rewards([oldRule(searchThenAnswer(q))], { beta: 0.4 }), [0]);
  },
);

t.test('confident reasoning, an unsure query token: no reward under either rule', async (t) => {
  const beta = getAlgorithm('beta-grpo');
  const p = [...confident];
  p[5] = 0.3;
  const r = searchThenAnswer(p);
  t.ok(close(searchCallConfidences(r)[0], 0.3));
  t.strictSame(beta.rewards([r], { beta: 0.4 }), [0], 'the query itself was unsure');
  t.strictSame(beta.rewards([r], { beta: 0.29 }), [1], 'a lower beta lets it through');
  // The answer turn's tokens are no search decision: an unsure answer token gates nothing.
  const a = [...confident];
  a[11] = 0.01;
  t.strictSame(beta.rewards([searchThenAnswer(a)], { beta: 0.4 }), [1]);
});

t.test('each call has its own span; one unsure call zeroes the rollout', async (t) => {
  const beta = getAlgorithm('beta-grpo');
  // turn 0 = [0, 4) query [2, 3); observation [4, 6); turn 1 = [6, 9) query [7, 8); obs [9, 10); answer [10, 12)
  const r = rollout({ index: 0, reward: 1, layout: 'ggggoogggogg', toolCalls: 2 });
  const p = [0.1, 0.2, 0.7, 0.1, 1, 1, 0.2, 0.5, 0.1, 1, 0.9, 0.9];
  const two = {
    ...r,
    toolCallSpans: [
      [2, 3],
      [7, 8],
    ] as Array<[number, number]>,
    responseLogprobs: p.map(Math.log),
  };
  const conf = searchCallConfidences(two);
  t.ok(close(conf[0], 0.7) && close(conf[1], 0.5), `[0.7, 0.5]: ${conf}`);
  t.strictSame(beta.rewards([two], { beta: 0.5 }), [1]);
  t.strictSame(beta.rewards([two], { beta: 0.6 }), [0], 'the second call is under 0.6');
  t.strictSame(searchCallConfidences({ ...two, toolCallSpans: [] }), [], 'no span, no decision');
  t.strictSame(beta.rewards([{ ...two, toolCallSpans: [] }], { beta: 0.99 }), [1]);
});
