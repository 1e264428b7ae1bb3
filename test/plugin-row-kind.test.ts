/**
 * A row kind registered by a plugin (PluginApi.registerRowKind, src/rl/row-kinds.ts) reaches the
 * batch: a plugin algorithm names it in its rowKinds, and the learner's step preparation
 * (prepareStep -> assembleBatch) lays out its rows and weighs them in L_AKBE like a built-in kind's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { prepareStep } from '../src/machines/prepare-step.js';
import { loadPlugins } from '../src/plugins/plugins.js';
import { getAlgorithm, rowKindsOf } from '../src/rl/algorithms/index.js';
import { assembleBatch } from '../src/rl/batch.js';
import { listRowKinds } from '../src/rl/row-kinds.js';
import { group } from './helpers/rollouts.js';

const dir = mkdtempSync(join(tmpdir(), 'akbe-row-kind-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

// Every correct no-tool rollout as its own L_AKBE target row, under its own prompt, recorded
// logprobs kept (an SFT-on-correct-no-tool kind: not a built-in one).
const PLUGIN = `export default function register(akbe) {
  akbe.registerRowKind('correct-no-tool', {
    description: 'every no-tool rollout with reward 1, as its own L_AKBE target row',
    akbeWeighted: true,
    addRows(q, rows) {
      for (const r of q.group.noTool.filter((x) => x.reward === 1))
        rows.push({
          info: {
            questionId: q.group.questionId,
            rolloutId: r.rolloutId,
            path: r.path,
            context: 'own',
            promptLength: r.promptTokens.length,
            length: r.promptTokens.length + r.responseTokens.length,
          },
          prompt: r.promptTokens,
          rollout: r,
          oldValid: true,
          advantage: 0,
          grpo: false,
          target: true,
        });
    },
  });
  akbe.registerAlgorithm({
    name: 'grpo-correct-no-tool',
    description: 'GRPO plus lambda * NLL of every correct no-tool rollout (plugin row kind test)',
    source: 'test/plugin-row-kind.test.ts',
    akbeTargets: false,
    needsNoTool: true,
    rowKinds: ['correct-no-tool'],
    options: {},
    rewards: akbe.outcomeRewards,
    losses: () => [],
  });
}
`;

t.test('a plugin-registered row kind reaches assembleBatch through the learner', async (t) => {
  writeFileSync(join(dir, 'kind.mjs'), PLUGIN);
  t.notOk(listRowKinds().includes('correct-no-tool'), 'not registered before the plugin loads');
  await loadPlugins(['kind.mjs'], dir);
  t.same(rowKindsOf(getAlgorithm('grpo-correct-no-tool')), ['correct-no-tool']);

  // q1: with-tool rewards 1, 0 (layout ggg each); no-tool rewards 0, 1: only nt1 is a row of the kind.
  const p = prepareStep(
    {
      runSeed: 7,
      batchQuestions: 1,
      miniBatchQuestions: 1,
      algo: 'grpo-correct-no-tool',
      advantage: 'grpo',
      targetSelection: 'min-tool-calls',
      targetContext: 'with-tool',
      losses: [],
      initialVersion: 0,
    },
    [group('q1', [1, 0], [0, 1])],
    {},
  );
  const b = p.batch;
  t.same(
    b.rowInfo.map((r) => [r.rolloutId, r.context]),
    [
      ['q1.wt0', 'with-tool'],
      ['q1.wt1', 'with-tool'],
      ['q1.nt1', 'own'],
    ],
    "the with-tool rows, then the kind's row",
  );
  t.same(Array.from(b.pgWeight), [1, 1, 0], "the kind's row is not in L_GRPO");
  // per-target: the one target's 3 generated tokens -> 1/3 each, as for a built-in kind.
  t.same(Array.from(b.akbeWeight), [0, 0, Math.fround(1 / 3)], 'weighted in L_AKBE');
  t.same(Array.from(b.inputIds).slice(2 * b.T, 2 * b.T + 6), [3, 4, 5, 210, 211, 212], 'its own prompt');
  t.same(Array.from(b.recomputeOld), [0, 0, 0], 'its recorded logprobs are pi_old');

  // The same kind straight through assembleBatch, beside a built-in one.
  const both = assembleBatch([{ group: group('q1', [1, 0], [0, 1]), label: null, advantages: [1, -1] }], {
    rowKinds: ['akbe-target', 'correct-no-tool'],
    miniBatchQuestions: 1,
  });
  t.equal(both.rows, 3, 'no label target, one row of the plugin kind');
});
