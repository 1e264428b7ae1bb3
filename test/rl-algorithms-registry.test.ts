/**
 * The algorithm registry's contract (mutation testing left it unchecked): what an entry's flags
 * imply is refused at registration, every entry cites its source, the option checks name the
 * config key, and which algorithms need the no-tool probe is what the config layer enforces.
 */
import t from 'tap';
import {
  type Algorithm,
  algorithmOptions,
  getAlgorithm,
  listAlgorithms,
  registerAlgorithm,
} from '../src/rl/algorithms/index.js';
import { validateTrainConfig } from '../src/rl/config.js';

/** A well-formed entry to break one field at a time (never registered as it is). */
const entry = (over: Partial<Algorithm>): Algorithm => ({
  name: 'test-entry',
  description: 'a test entry',
  source: 'this test',
  akbeTargets: false,
  needsNoTool: false,
  options: {},
  rewards: (w) => w.map((r) => r.reward),
  losses: () => [],
  ...over,
});

t.test('registration refuses entries whose flags contradict each other or cite nothing', async (t) => {
  t.throws(() => registerAlgorithm(entry({ name: 'no-desc', description: ' ' })), {
    name: 'TypeError',
    message: "algorithm 'no-desc': description is empty",
  });
  t.throws(() => registerAlgorithm(entry({ name: 'no-source', source: '  ' })), {
    message: "algorithm 'no-source': source is empty (cite the paper, section or code it implements)",
  });
  t.throws(() => registerAlgorithm(entry({ name: 'dpo-alone', dpoPairs: true, needsNoTool: true })), {
    message: "algorithm 'dpo-alone': dpoPairs needs akbeTargets (the chosen side is the AKBE target)",
  });
  for (const flags of [{ akbeTargets: true }, { offlineTargets: true }])
    t.throws(() => registerAlgorithm(entry({ name: 'targets-blind', ...flags })), {
      message:
        "algorithm 'targets-blind': AKBE targets need the boundary labels, so needsNoTool must be true",
    });
  t.notOk(listAlgorithms().some((n) => ['no-desc', 'no-source', 'dpo-alone', 'targets-blind'].includes(n)));
});

t.test('every registered algorithm cites where its definition comes from', async (t) => {
  const cites: Record<string, RegExp> = {
    grpo: /2402\.03300/,
    akbe: /akbe-paper/,
    'offline-akbe': /akbe-paper.*§5\.1/,
    'dpo-akbe': /2305\.18290/,
    'otc-po': /2504\.14870/,
    'beta-grpo': /2505\.17281/,
  };
  t.strictSame([...listAlgorithms()].sort(), Object.keys(cites).sort());
  for (const [name, re] of Object.entries(cites)) {
    t.match(getAlgorithm(name).source, re, name);
    t.ok(getAlgorithm(name).description.length > 20, `${name} describes itself`);
  }
});

t.test('which algorithms need the no-tool probe is what the config enforces', async (t) => {
  for (const algo of ['grpo', 'otc-po', 'beta-grpo'])
    t.equal(validateTrainConfig({ algo, gNoTool: 0 }).gNoTool, 0, `${algo} trains without it`);
  for (const algo of ['akbe', 'dpo-akbe'])
    t.throws(() => validateTrainConfig({ algo, gNoTool: 0 }), {
      name: 'ConfigError',
      key: 'gNoTool',
      message: `config.gNoTool must be >= 1 when config.algo is '${algo}' (the no-tool probe labels the boundary), got 0`,
    });
});

t.test('option errors name the algoOptions key; dpo-akbe wants beta > 0', async (t) => {
  const dpo = getAlgorithm('dpo-akbe');
  t.strictSame(algorithmOptions(dpo), { beta: 0.1 });
  t.strictSame(algorithmOptions(dpo, { beta: 1e-9 }), { beta: 1e-9 }, 'just above 0');
  for (const beta of [0, -0.5])
    t.throws(() => algorithmOptions(dpo, { beta }), {
      name: 'ConfigError',
      key: 'algoOptions',
      message: `config.algoOptions: beta must be > 0, got ${beta}`,
    });
  t.throws(() => dpo.validateOptions!({ beta: Number.NaN }), {
    name: 'RangeError',
    message: /^beta must be > 0/,
  });
  t.throws(() => algorithmOptions(dpo, { gamma: 1 }), {
    key: 'algoOptions',
    message: /gamma is not an option/,
  });
  t.throws(() => algorithmOptions(dpo, { beta: '0.1' }), {
    key: 'algoOptions',
    message: 'config.algoOptions.beta must be a number, got "0.1"',
  });
  t.throws(() => algorithmOptions(dpo, { beta: null }), {
    message: 'config.algoOptions.beta must be a number, got null',
  });
});
