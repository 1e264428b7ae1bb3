/**
 * Issue 5's acceptance on the committed default base (assets/base, made by `akbe world build
 * --seed 0` + `akbe pretrain`, 2000 steps): the knowledge boundary is real in the base policy, and
 * `akbe eval` is reproducible with the same seed. Single-hop questions of the dev split, temperature
 * 1, 4 samples per question and path.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runCli } from './helpers/cli.js';

interface PathStats {
  em: number;
  tc: number;
}
interface Report {
  groups: Array<{ group: string; noTool: PathStats; withTool: PathStats }>;
  boundary: { single: { searchRateKnown: number } };
}

const dir = mkdtempSync(join(tmpdir(), 'akbe-base-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const world = join(dir, 'world');
const base = new URL('../assets/base', import.meta.url).pathname;

t.test('the committed base was trained on the world that seed 0 builds', async (t) => {
  const built = await runCli('world', 'build', '--seed', '0', '--out', world);
  t.equal(built.code, 0, built.err);
  const summary = JSON.parse(readFileSync(join(world, 'world.json'), 'utf8'));
  const pretrain = JSON.parse(readFileSync(join(base, 'pretrain.json'), 'utf8'));
  t.equal(pretrain.worldTokens, summary.digests['pretrain/tokens.u16']);
  t.equal(
    readFileSync(join(base, 'tokenizer.json'), 'utf8'),
    readFileSync(join(world, 'tokenizer.json'), 'utf8'),
  );
});

t.test('the boundary is real in the base policy, and eval is reproducible', async (t) => {
  const run = async (file: string) => {
    const r = await runCli(
      'eval',
      '--checkpoint',
      base,
      '--world',
      world,
      '--split',
      'dev',
      '--samples',
      '4',
      '--seed',
      '0',
      '--json',
      join(dir, file),
    );
    t.equal(r.code, 0, r.err);
    return { text: r.out, report: JSON.parse(readFileSync(join(dir, file), 'utf8')).report as Report };
  };
  const a = await run('a.json');
  const group = (name: string) => a.report.groups.find((g) => g.group === name)!;
  const known = group('single/known');
  const unknown = group('single/unknown');
  t.ok(known.noTool.em >= 0.8, `no-tool EM on known single-hop ${known.noTool.em} >= 0.8`);
  t.ok(unknown.noTool.em <= 0.1, `no-tool EM on unknown single-hop ${unknown.noTool.em} <= 0.1`);
  t.ok(unknown.withTool.em >= 0.5, `with-tool EM on unknown single-hop ${unknown.withTool.em} >= 0.5`);
  const searchKnown = a.report.boundary.single.searchRateKnown;
  t.ok(searchKnown >= 0.3 && searchKnown <= 0.8, `search rate on known ${searchKnown} in [0.3, 0.8]`);

  const b = await run('b.json');
  t.equal(b.text, a.text, 'same seed, same eval output');
});
