/**
 * The plugin loader (src/plugins): a plugin registers through the API it is handed, runs once per
 * process, is recorded with its sha256, and a recorded plugin whose bytes changed is refused.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import t from 'tap';
import { loadPlugins, loadRecordedPlugins, PluginError, pluginRefsOf } from '../src/plugins/plugins.js';
import { getAlgorithm, listAlgorithms } from '../src/rl/algorithms/index.js';
import type { RolloutResult } from '../src/rl/types.js';

const dir = mkdtempSync(join(tmpdir(), 'akbe-plugins-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// A plugin is an ES module: .mjs, or .js under a package.json of type module (as a project's are).
writeFileSync(join(dir, 'package.json'), '{"type": "module"}\n');
const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');

t.test('the example plugin registers its algorithm, once, recorded with its sha256', async (t) => {
  const example = resolve('examples/plugins/search-cost.js');
  t.notOk(listAlgorithms().includes('grpo-search-cost'));
  const refs = await loadPlugins(['examples/plugins/search-cost.js'], resolve('.'));
  t.same(refs, [{ path: example, sha256: sha(example) }]);
  const a = getAlgorithm('grpo-search-cost');
  // Hand-worked: rewards 1, 1, 0 with 0, 2, 1 searches at cost 0.1 -> 1, 0.8, -0.1.
  const r = (reward: number, toolCalls: number) => ({ reward, toolCalls }) as RolloutResult;
  const got = a.rewards([r(1, 0), r(1, 2), r(0, 1)], { cost: 0.1 });
  t.same(
    got.map((x) => Math.round(x * 1e9) / 1e9),
    [1, 0.8, -0.1],
  );
  // A second load (the same process: a worker role beside the orchestrator) registers nothing again.
  t.same(await loadRecordedPlugins(refs), refs);
  t.throws(() => a.validateOptions?.({ cost: 2 }), /cost must lie in \[0, 1\]/);
});

t.test('a recorded plugin that changed is refused, naming both digests', async (t) => {
  const f = join(dir, 'changed.js');
  writeFileSync(f, 'export default () => {};\n');
  const refs = [{ path: f, sha256: sha(f) }];
  writeFileSync(f, 'export default (akbe) => akbe.registerTool("evil", () => { throw new Error(); });\n');
  await t.rejects(loadRecordedPlugins(refs), /its sha256 is [0-9a-f]{64}, but the run recorded [0-9a-f]{64}/);
});

t.test('a module without a default function, a missing file and a failing registration', async (t) => {
  const noDefault = join(dir, 'no-default.js');
  writeFileSync(noDefault, 'export const x = 1;\n');
  await t.rejects(loadPlugins([noDefault], dir), /default export must be a function/);
  await t.rejects(loadPlugins(['missing.js'], dir), /missing\.js: cannot read it \(ENOENT\)/);
  const dup = join(dir, 'dup.js');
  writeFileSync(dup, "export default (akbe) => akbe.registerAlgorithm({ name: 'grpo' });\n");
  const err = await loadPlugins([dup], dir).catch((e: unknown) => e);
  t.type(err, PluginError);
  t.match((err as Error).message, /dup\.js: its registration failed/);
});

t.test('run.started records are checked before anything is read from them', async (t) => {
  t.same(pluginRefsOf(undefined), []);
  t.throws(() => pluginRefsOf([{ path: 'relative.js', sha256: 'a'.repeat(64) }]), /list of \{path, sha256\}/);
  t.throws(() => pluginRefsOf([{ path: '/abs.js', sha256: 'xyz' }]), /list of \{path, sha256\}/);
  t.throws(() => pluginRefsOf('/abs.js'), /list of \{path, sha256\}/);
});

t.test(
  "a config's plugins load from the config's folder, before the algorithm it names is checked",
  async (t) => {
    const { parseJobConfig } = await import('../src/cli/commands/train-job.js');
    writeFileSync(
      join(dir, 'my-algo.js'),
      [
        'export default (akbe) => akbe.registerAlgorithm({',
        "  name: 'my-algo', description: 'GRPO under another name (test)', source: 'test/plugins.test.ts',",
        '  akbeTargets: false, needsNoTool: false, options: {}, rewards: akbe.outcomeRewards,',
        '  losses: (cfg) => [{ name: akbe.LossName.GRPO, options: { clipEps: cfg.clipEps } }],',
        '});',
      ].join('\n'),
    );
    const file = join(dir, 'run.yaml');
    const job = await parseJobConfig('algo: my-algo\nplugins: [./my-algo.js]\n', file);
    t.equal(job.train.algo, 'my-algo');
    t.same(job.plugins, [{ path: join(dir, 'my-algo.js'), sha256: sha(join(dir, 'my-algo.js')) }]);
    await t.rejects(
      parseJobConfig('plugins: ./my-algo.js\n', file),
      /config\.plugins must be a list of module paths/,
    );
    await t.rejects(parseJobConfig('plugins: [./nope.js]\n', file), /nope\.js: cannot read it/);
  },
);
