/**
 * The algorithm registry and the reward shapings worked by hand: OTC-GRPO's tool-productivity
 * reward (Wang et al. 2025) and beta-GRPO's confidence gate (Wu et al. 2025); then each algorithm
 * through the learner machines and the audit (test/helpers/audit-run.ts): the log replays clean,
 * and a changed algorithm option shows up as recomputed advantages.
 */
import t from 'tap';
import { auditRun } from '../src/audit/audit.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { searchCallConfidences } from '../src/rl/algorithms/beta-grpo.js';
import {
  algorithmOptions,
  getAlgorithm,
  listAlgorithms,
  lossTermsFor,
  registerAlgorithm,
} from '../src/rl/algorithms/index.js';
import { otcToolReward } from '../src/rl/algorithms/otc-po.js';
import { DEFAULT_TRAIN_CONFIG, validateTrainConfig } from '../src/rl/config.js';
import type { RolloutResult } from '../src/rl/types.js';
import { auditRunEvents, withSeqs } from './helpers/audit-run.js';
import { rollout } from './helpers/rollouts.js';

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

t.test('the registry: every algorithm by name, unknown names listed, duplicates refused', async (t) => {
  t.same(listAlgorithms(), ['akbe', 'beta-grpo', 'dpo-akbe', 'grpo', 'offline-akbe', 'otc-po']);
  t.throws(() => getAlgorithm('dpo'), {
    name: 'UnknownRegistryNameError',
    message: "unknown algorithm 'dpo'; known: akbe, beta-grpo, dpo-akbe, grpo, offline-akbe, otc-po",
  });
  t.throws(() => registerAlgorithm({ ...getAlgorithm('grpo'), description: 'another' }), {
    name: 'DuplicateRegistrationError',
  });
  t.same(
    lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'otc-po' }).map((l) => l.name),
    ['grpo'],
  );
  t.same(
    lossTermsFor({ ...DEFAULT_TRAIN_CONFIG, algo: 'akbe' }).map((l) => l.name),
    ['grpo', 'akbe-nll'],
  );
  t.equal(validateTrainConfig({ algo: 'beta-grpo', gNoTool: 0 }).gNoTool, 0, 'no no-tool probe needed');
  t.same(validateTrainConfig({ algo: 'otc-po', algoOptions: { c: 3 } }).algoOptions, { alpha: 1, c: 3 });
  t.throws(() => validateTrainConfig({ algo: 'otc-po', algoOptions: { beta: 0.5 } }), {
    name: 'ConfigError',
    message: "config.algoOptions.beta is not an option of algo 'otc-po'; its options: alpha, c",
  });
  t.throws(() => validateTrainConfig({ algo: 'beta-grpo', algoOptions: { beta: 2 } }), {
    message: 'config.algoOptions: beta must be in [0, 1], got 2',
  });
  t.throws(() => validateTrainConfig({ algo: 'ppo' }), {
    message: /config\.algo must be one of 'akbe', 'beta-grpo'/,
  });
});

const calls = (reward: number, toolCalls: number, index: number): RolloutResult =>
  rollout({ index, reward, toolCalls });

t.test('OTC-GRPO: r_tool = sin(f(m, n) pi / 2n) around the group optimum n, times EM', async (t) => {
  const otc = getAlgorithm('otc-po');
  const o = algorithmOptions(otc);
  // n = 1 (the fewest calls among correct rollouts); f(2, 1) = 4/3, f(3, 1) = 3/2.
  const r = otc.rewards([calls(1, 1, 0), calls(1, 2, 1), calls(1, 3, 2), calls(0, 0, 3)], o);
  t.ok(close(r[0], 1), `m = n: ${r[0]}`);
  t.ok(close(r[1], Math.sqrt(3) / 2), `m = 2: sin(2 pi / 3) = ${r[1]}`);
  t.ok(close(r[2], Math.SQRT1_2), `m = 3: sin(3 pi / 4) = ${r[2]}`);
  t.equal(r[3], 0, 'a wrong answer gets 0 whatever its calls (fewer than n here)');
  // n = 0: the cos branch with c = 6.
  const z = otc.rewards([calls(1, 0, 0), calls(1, 2, 1), calls(1, 4, 2)], o);
  t.same(z[0], 1, 'm = n = 0');
  t.ok(close(z[1], Math.cos(Math.PI / 5)), `cos(2 pi / (4 + 6)) = ${z[1]}`);
  t.ok(close(z[2], Math.cos((2 * Math.PI) / 7)), `cos(4 pi / (8 + 6)) = ${z[2]}`);
  t.same(otc.rewards([calls(0, 1, 0), calls(0, 2, 1)], o), [0, 0], 'no correct rollout: no n, all 0');
  t.ok(close(otc.rewards([calls(1, 2, 0)], { alpha: 2, c: 6 })[0], 2), 'alpha scales');
  t.ok(otcToolReward(50, 1, 6) < 0.1, 'far past the optimum the factor falls toward 0');
});

/** A with-tool rollout from (mask, probability) pairs: 1 = generated with probability p, 0 = observation. */
function turns(reward: number, tokens: Array<[0 | 1, number]>): RolloutResult {
  const r = rollout({ index: 0, reward, layout: tokens.map(([m]) => (m ? 'g' : 'o')).join('') });
  return { ...r, responseLogprobs: tokens.map(([m, p]) => (m ? Math.log(p) : 0)) };
}

t.test('beta-GRPO: the reward survives only if every search span had min probability >= beta', async (t) => {
  const beta = getAlgorithm('beta-grpo');
  // The helper's spans are whole search turns; the query's own span: test/rl-beta-grpo.test.ts.
  // Turn 1 (0.9, 0.5) ends in a search, an observation, then the answer turn (0.8, 0.95).
  const one = turns(1, [
    [1, 0.9],
    [1, 0.5],
    [0, 1],
    [0, 1],
    [1, 0.8],
    [1, 0.95],
  ]);
  const conf = searchCallConfidences(one);
  t.equal(conf.length, 1);
  t.ok(close(conf[0], 0.5));
  t.same(beta.rewards([one], { beta: 0.4 }), [1]);
  t.same(beta.rewards([one], { beta: 0.6 }), [0], 'an unsure search loses the reward');
  const two = turns(1, [
    [1, 0.7],
    [0, 1],
    [1, 0.3],
    [0, 1],
    [1, 0.9],
  ]);
  t.same(
    searchCallConfidences(two).map((p) => Math.round(p * 100) / 100),
    [0.7, 0.3],
  );
  t.same(beta.rewards([two], { beta: 0.4 }), [0], 'the second search was unsure');
  const noSearch = turns(1, [
    [1, 0.1],
    [1, 0.2],
  ]);
  t.same(searchCallConfidences(noSearch), []);
  t.same(beta.rewards([noSearch], { beta: 0.9 }), [1], 'no search, no decision to doubt: EM kept');
  t.same(beta.rewards([turns(0, [[1, 0.99]])], { beta: 0 }), [0], 'a wrong answer stays 0');
});

for (const algo of ['grpo', 'akbe', 'otc-po', 'beta-grpo', 'dpo-akbe']) {
  t.test(`${algo}: the learner's log replays clean; the audit recomputes its rewards`, async (t) => {
    const run = await auditRunEvents({
      runId: `alg-${algo}`,
      steps: 2,
      config: { algo, algoOptions: algo === 'beta-grpo' ? { beta: 0.05 } : {} },
    });
    const events = withSeqs(run.events);
    const clean = auditRun(events);
    t.same(clean.mismatches, []);
    t.ok(clean.checked.rows > 0);
    const rows = events.flatMap((e) => (e.type === 'learner.step' ? (e.data.batch?.rows ?? []) : []));
    t.equal(
      rows.some((r) => r.akbe),
      algo === 'akbe',
      'only akbe trains targets',
    );
    if (algo === 'dpo-akbe') {
      const steps = events.filter((e) => e.type === 'learner.step');
      const pairs = steps.flatMap((e) => (e.type === 'learner.step' ? (e.data.batch?.dpoPairs ?? []) : []));
      t.ok(pairs.length > 0, `${pairs.length} pairs recorded and re-derived`);
      // Another rejected row, or a pair without its reference logprobs, is a mismatch.
      const changed = events.map((e) => structuredClone(e)) as AkbeEvent[];
      const step = changed.find(
        (e) => e.type === 'learner.step' && (e.data.batch?.dpoPairs?.length ?? 0) > 0,
      );
      const pair = (step as EventOf<'learner.step'>).data.batch!.dpoPairs![0];
      pair.rejected = pair.chosen;
      t.ok(auditRun(changed).mismatches.some((m) => m.field === 'batch.dpoPairs'));
      pair.rejected = pairs[0].rejected;
      delete pair.refChosen;
      t.ok(auditRun(changed).mismatches.some((m) => m.field === 'batch.dpoPairs[0].refChosen'));
    }
    if (algo === 'otc-po' || algo === 'beta-grpo') {
      // Another option changes the recomputed rewards, so the recorded advantages no longer match.
      const changed = events.map((e) => structuredClone(e)) as AkbeEvent[];
      const started = changed.find((e) => e.type === 'run.started') as EventOf<'run.started'>;
      (started.data.config as Record<string, unknown>).algoOptions =
        algo === 'otc-po' ? { c: 0.5, alpha: 3 } : { beta: 1 };
      const fields = auditRun(changed).mismatches.map((m) => m.field);
      t.ok(
        fields.some((f) => /\.advantage$/.test(f)),
        `advantages recomputed with the other option: ${fields.slice(0, 3).join(', ')}`,
      );
    }
  });
}
