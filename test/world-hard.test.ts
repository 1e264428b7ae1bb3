/**
 * The hard world preset (`akbe world build --preset hard`) beside the default: both are seeded and
 * byte-identical (known-answer digests of world.json, which records the sha256 of every other
 * file), the default is today's world byte for byte, and the hard knobs do what docs/world.md says.
 * The oracle and mix rules that hold for every preset run in world-generate.test.ts and
 * world-pretrain.test.ts.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseJobConfig } from '../src/cli/commands/train-job.js';
import { parseSpec, planRuns } from '../src/experiments/spec.js';
import { bruteForceTopK } from '../src/retrieval/hnsw.js';
import { LEXICAL_DEFAULTS, LexicalEmbedder } from '../src/retrieval/lexical.js';
import {
  DEFAULT_WORLD,
  HARD_WORLD,
  presetConfig,
  TINY_WORLD,
  validateWorldConfig,
} from '../src/world/config.js';
import { DECOY_PREFIX, DECOY_RELATIVES, decoySentence } from '../src/world/corpus.js';
import { worldFiles } from '../src/world/files.js';
import { generateWorld, type World } from '../src/world/generate.js';
import { bucketsFor } from '../src/world/pretrain.js';
import { RELATION_SPECS } from '../src/world/relations.js';
import { LexicalRetriever } from '../src/world/retrieval.js';
import { runCli } from './helpers/cli.js';

const worldJsonSha = (w: World) =>
  createHash('sha256').update(worldFiles(w).get('world.json')!).digest('hex');

// Known answers: the default is the world of sessions 1-3 (assets/base was pretrained on it);
// the hard one is the world assets/base-hard was pretrained on.
const DEFAULT_SEED0 = '4466b4e8241e59b6c23381b87dcbd57f165ab7250dbbd3c846a06c484b1cc88d';
const HARD_SEED0 = 'cc0eb40d9fad2df762bc037632010b4fb7218b95ae9b762f3bcbd04b32c9edb9';

const def = generateWorld(presetConfig('default', 'default', 0));
const hard = generateWorld(presetConfig('hard', 'default', 0));

t.test('known-answer digests: the default world is unchanged, the hard one is fixed', async (t) => {
  t.equal(worldJsonSha(def), DEFAULT_SEED0, 'default, seed 0');
  t.same(presetConfig('default', 'default', 0), { ...DEFAULT_WORLD, seed: 0 }, 'the preset is DEFAULT_WORLD');
  t.equal(worldJsonSha(hard), HARD_SEED0, 'hard, seed 0');
  // The default world's files never mention the hard knobs (absent, not zero).
  const config = JSON.parse(new TextDecoder().decode(worldFiles(def).get('world.json')!)).config;
  for (const k of ['bridgeAffinity', 'decoys', 'composeKinds', 'comparePerCell']) t.notOk(k in config, k);
});

t.test('the hard world has a larger unknown share and more multi-hop questions', async (t) => {
  const knownShare = (w: World) =>
    w.index.graph.facts.filter((f) => f.repeats > 0).length / w.index.graph.facts.length;
  t.ok(knownShare(hard) < knownShare(def) - 0.05, `known facts ${knownShare(hard)} vs ${knownShare(def)}`);
  const test = (w: World) => w.questions.filter((q) => q.split === 'test');
  const share = (w: World, p: (q: World['questions'][number]) => boolean) =>
    test(w).filter(p).length / test(w).length;
  t.ok(share(hard, (q) => !q.known) > share(def, (q) => !q.known), 'more unknown test questions');
  t.ok(share(hard, (q) => q.hop !== 'single') > share(def, (q) => q.hop !== 'single') + 0.1);
  // Bridge affinity: unknown compositions in a held-out split (the default has 3).
  const unknownCompose = (w: World) => test(w).filter((q) => q.hop === 'compose' && !q.known).length;
  t.ok(unknownCompose(hard) >= 30, `${unknownCompose(hard)} unknown compositions in test`);
  t.ok(unknownCompose(def) < 10);
  // Comparisons (yes/no) are capped apart: at most comparePerCell per kind and cell.
  const cells = new Map<string, number>();
  for (const q of hard.questions.filter((q) => q.hop === 'compare')) {
    const key = `${q.kind}|${q.split}|${q.known}`;
    cells.set(key, (cells.get(key) ?? 0) + 1);
  }
  t.ok(Math.max(...cells.values()) <= HARD_WORLD.comparePerCell!, 'comparisons capped');
  t.ok(share(hard, (q) => q.hop === 'compare') < 0.2, 'comparisons are a minority of test');
  const kinds = new Set(hard.questions.map((q) => q.kind));
  for (const k of HARD_WORLD.composeKinds!) t.ok(kinds.has(k), `${k} has questions`);
  t.notOk(
    def.questions.some((q) => q.kind === 'city_capital'),
    'the default keeps its six compositions',
  );
});

t.test(
  'decoy passages: wrong objects about relatives, in the subject\u2019s article, ranked beside the true passage',
  async (t) => {
    const decoys = hard.passages.filter((p) => p.fact.startsWith(DECOY_PREFIX));
    t.equal(decoys.length, 2 * hard.index.graph.facts.length, 'decoys 2: two per fact');
    t.notOk(
      def.passages.some((p) => p.fact.startsWith(DECOY_PREFIX)),
      'none in the default',
    );
    const bad: string[] = [];
    const perFact = new Map<string, number>();
    for (const p of decoys) {
      const f = hard.index.factById.get(p.fact.slice(DECOY_PREFIX.length))!;
      const [title, text] = p.contents.split('\n');
      const nth = perFact.get(f.id) ?? 0;
      perFact.set(f.id, nth + 1);
      const object = hard.index.graph.entities.find(
        (e) =>
          e.type === RELATION_SPECS[f.relation].object &&
          text === decoySentence(f.relation, `${DECOY_RELATIVES[nth]} ${title}`, e.name),
      );
      if (title !== hard.index.name(f.subject) || p.entity !== f.subject) bad.push(`${p.id}: title`);
      if (!object || object.id === f.object) bad.push(`${p.id}: object`);
    }
    t.same(bad, []);
    t.equal(decoySentence('capital', 'the rival of Xa', 'Yb'), 'The capital of the rival of Xa is Yb.');
    t.equal(decoySentence('born_in', 'a partner of Xa', 'Yb'), 'A partner of Xa was born in Yb.');
    // Retrieval as the demonstrations and the search service do it: a decoy comes back with the
    // true passage for most of its fact's queries. LexicalRetriever scores every passage on all
    // 1,024 hashed dimensions (20 s for the 976 queries under coverage); the query has a dozen
    // nonzero ones, and bruteForceTopK on just those columns adds the same nonzero terms in the
    // same order, so it returns the same scores bit for bit and the same ranking, ties included.
    // The first 40 queries are checked against LexicalRetriever itself.
    const r = new LexicalRetriever(hard.passages, hard.passages);
    const embedder = LexicalEmbedder.fit(
      hard.passages.map((p) => p.contents),
      LEXICAL_DEFAULTS,
    );
    const rows = hard.passages.map((p) => embedder.embed(p.contents));
    const top3 = (query: string) => {
      const q = embedder.embed(query);
      const nz = [...q.keys()].filter((j) => q[j] !== 0);
      if (nz.length === 0) return r.search(query, 3); // every score 0: the first 3 passages
      const sub = new Float32Array(rows.length * nz.length);
      for (let i = 0; i < rows.length; i++)
        for (let k = 0; k < nz.length; k++) sub[i * nz.length + k] = rows[i][nz[k]];
      const top = bruteForceTopK(
        sub,
        nz.length,
        Float32Array.from(nz, (j) => q[j]),
        3,
      );
      return top.labels.map((l) => hard.passages[l]);
    };
    let beside = 0;
    hard.index.graph.facts.forEach((f, i) => {
      const query = RELATION_SPECS[f.relation].query(hard.index.name(f.subject));
      const hits = top3(query);
      if (i < 40)
        t.same(
          hits.map((h) => h.id),
          r.search(query, 3).map((h) => h.id),
          `the retriever's top 3: ${query}`,
        );
      if (hits.some((h) => h.fact === f.id) && hits.some((h) => h.fact === `${DECOY_PREFIX}${f.id}`))
        beside++;
    });
    t.ok(beside / hard.index.graph.facts.length > 0.5, `a decoy beside the true passage for ${beside} facts`);
  },
);

t.test('the hard knobs are validated; buckets follow the context', async (t) => {
  for (const [k, v] of [
    ['bridgeAffinity', 1.5],
    ['decoys', 3],
    ['decoys', 0.5],
  ] as const)
    t.throws(() => validateWorldConfig({ ...TINY_WORLD, [k]: v }), { name: 'WorldConfigError', message: k });
  t.throws(() => validateWorldConfig({ ...TINY_WORLD, composeKinds: ['nope'] }), {
    message: /composeKinds names no composition template: nope/,
  });
  t.same(bucketsFor(128), [32, 64, 96, 128], 'the default context keeps the default buckets');
  t.same(bucketsFor(160), [32, 64, 96, 128, 160]);
  t.same(bucketsFor(100), [32, 64, 96, 100]);
});

t.test('akbe world build --preset hard, and akbe pretrain takes the world\u2019s context', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-hard-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const world = join(dir, 'world');
  const built = await runCli(
    'world',
    'build',
    '--preset',
    'hard',
    '--size',
    'tiny',
    '--seed',
    '2',
    '--out',
    world,
  );
  t.equal(built.code, 0, built.err);
  t.match(built.out, /^world hard seed 2 -> /);
  const summary = JSON.parse(readFileSync(join(world, 'world.json'), 'utf8'));
  t.same(summary.config, presetConfig('hard', 'tiny', 2));
  t.equal((await runCli('world', 'build', '--preset', 'nope', '--out', world)).code, 2);
  const out = join(dir, 'base');
  const pre = await runCli('pretrain', '--world', world, '--out', out, '--steps', '1', '--batch', '8');
  t.equal(pre.code, 0, pre.err);
  const state = JSON.parse(readFileSync(join(out, 'pretrain.json'), 'utf8'));
  t.same(state.config.buckets, [32, 64, 96, 128, 160], 'the hard mix holds 160-token sequences');
  t.equal(JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).n_positions, 160);
});

t.test(
  'configs/hard.yaml is configs/default.yaml on the hard world; paper-hard.yaml is paper.yaml\u2019s grid',
  async (t) => {
    const read = (f: string) => readFileSync(f, 'utf8');
    const d = await parseJobConfig(read('configs/default.yaml'), 'configs/default.yaml');
    const h = await parseJobConfig(read('configs/hard.yaml'), 'configs/hard.yaml');
    t.match(h.world, /\.akbe\/world-hard$/);
    t.match(h.policy, /assets\/base-hard$/);
    t.equal(h.train.maxResponseTokens, 136, 'two searches with decoys fit');
    t.same({ ...h, world: d.world, policy: d.policy, train: { ...h.train, maxResponseTokens: 128 } }, d);
    const paper = await parseSpec(read('experiments/paper.yaml'), 'experiments/paper.yaml');
    const hard = await parseSpec(read('experiments/paper-hard.yaml'), 'experiments/paper-hard.yaml');
    t.equal(hard.base, 'configs/hard.yaml');
    // The same grid; offline-akbe freezes each grid's own grpo seed-0 run.
    const ownRuns = (cells: typeof paper.cells, name: string) =>
      JSON.stringify(cells).replaceAll(`run:${name}-grpo-s0`, 'run:<grid>-grpo-s0');
    t.equal(ownRuns(hard.cells, 'paper-hard'), ownRuns(paper.cells, 'paper'), 'the same grid');
    t.ok(JSON.stringify(hard.cells).includes('run:paper-hard-grpo-s0'));
    t.same(hard.seeds, paper.seeds);
    t.same(hard.over, paper.over, 'the same steps and evaluation');
    t.same(
      planRuns(hard).map((r) => r.runId),
      planRuns(paper).map((r) => r.runId.replace(/^paper-/, 'paper-hard-')),
    );
  },
);
