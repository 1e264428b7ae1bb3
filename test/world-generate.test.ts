import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { COMPOSE_KINDS } from '../src/world/compose-kinds.js';
import {
  presetConfig,
  TINY_WORLD,
  validateWorldConfig,
  WORLD_PRESETS,
  type WorldPreset,
} from '../src/world/config.js';
import { SPLITS } from '../src/world/entities.js';
import { readQuestions, readWorldSummary, worldFiles } from '../src/world/files.js';
import { generateWorld } from '../src/world/generate.js';
import { COMPARE_KINDS } from '../src/world/questions.js';
import { runCli } from './helpers/cli.js';

const world = generateWorld({ ...TINY_WORLD, seed: 11 });
const digest = (files: Map<string, Uint8Array>) =>
  Object.fromEntries([...files].map(([p, b]) => [p, createHash('sha256').update(b).digest('hex')]));

// Every property of the world below holds for each preset (at the tiny size); the hard preset's
// own knobs are tested in world-hard.test.ts.
for (const preset of Object.keys(WORLD_PRESETS) as WorldPreset[]) {
  const world = generateWorld(presetConfig(preset, 'tiny', 11));

  t.test(
    `${preset}: the same seed gives byte-identical world files; another seed gives other files`,
    async (t) => {
      const a = digest(worldFiles(world));
      const b = digest(worldFiles(generateWorld(presetConfig(preset, 'tiny', 11))));
      t.same(a, b);
      t.ok(Object.keys(a).length >= 12, 'every file is rendered');
      const c = digest(worldFiles(generateWorld(presetConfig(preset, 'tiny', 12))));
      for (const f of ['corpus.jsonl', 'questions/dev.jsonl', 'pretrain/tokens.u16', 'world.json'])
        t.not(c[f], a[f], `${f} differs`);
    },
  );

  t.test(
    `${preset}: question splits are disjoint by entity, and the demonstration pool is in none`,
    async (t) => {
      const owner = new Map<string, string>();
      for (const q of world.questions) {
        if (q.split === 'demo') continue;
        // Topic entities, and every entity of an unknown question, belong to exactly one split.
        const ids = q.known ? [q.entities[0]] : q.entities;
        for (const id of ids) {
          const prev = owner.get(id);
          if (prev && prev !== q.split) t.fail(`${id} is in ${prev} and ${q.split}`);
          owner.set(id, q.split);
        }
        for (const id of q.entities)
          t.not(world.index.entity.get(id)!.role, 'demo', `${q.id} uses a demo-pool entity`);
      }
      for (const split of SPLITS) t.ok([...owner.values()].includes(split), `${split} has questions`);
      t.ok(
        world.questions.some((q) => q.split === 'demo'),
        'the demo pool has questions',
      );
    },
  );

  t.test(
    `${preset}: the oracle label says whether all needed facts are known, and a question is wholly known or unknown`,
    async (t) => {
      for (const q of world.questions) {
        const known = q.facts.map((id) => world.index.known(world.index.factById.get(id)!));
        if (q.known) t.ok(known.every(Boolean), `${q.id} known`);
        else t.notOk(known.some(Boolean), `${q.id} unknown`);
      }
      const cells = new Set(world.questions.map((q) => `${q.split}/${q.known}`));
      for (const split of SPLITS)
        t.ok(cells.has(`${split}/true`) && cells.has(`${split}/false`), `${split} has known and unknown`);
    },
  );

  t.test(`${preset}: multi-hop answers follow the relation graph`, async (t) => {
    const ix = world.index;
    const compose = world.questions.filter((q) => q.hop === 'compose');
    const compare = world.questions.filter((q) => q.hop === 'compare');
    t.ok(compose.length > 0 && compare.length > 0);
    for (const q of compose) {
      const [f1, f2] = q.facts.map((id) => ix.factById.get(id)!);
      const k = COMPOSE_KINDS.find((c) => c.kind === q.kind)!;
      t.equal(f1.relation, k.first);
      t.equal(f2.relation, k.second);
      t.equal(f1.subject, q.entities[0]);
      t.equal(f2.subject, f1.object, 'the bridge is the first object');
      t.equal(q.question, k.question(ix.name(f1.subject)));
      t.equal(q.golden_answers[0], ix.name(f2.object));
    }
    for (const q of compare) {
      const [fa, fb] = q.facts.map((id) => ix.factById.get(id)!);
      t.equal(fa.relation, COMPARE_KINDS.find((c) => c.kind === q.kind)!.relation);
      t.same(q.golden_answers, [fa.object === fb.object ? 'yes' : 'no']);
    }
    const answers = compare.map((q) => q.golden_answers[0]);
    t.ok(answers.includes('yes') && answers.includes('no'), 'comparisons are balanced between yes and no');
  });

  t.test(
    `${preset}: gold answers carry aliases, and single-hop questions ask for the fact object`,
    async (t) => {
      const ix = world.index;
      for (const q of world.questions.filter((q) => q.hop === 'single')) {
        const f = ix.factById.get(q.facts[0])!;
        const o = ix.entity.get(f.object)!;
        t.same(q.golden_answers, [o.name, ...o.aliases]);
      }
      t.ok(
        world.questions.some((q) => q.golden_answers.length > 1),
        'some answers have an alias',
      );
    },
  );

  t.test(`${preset}: names are confusable: persons share surnames, titles share words`, async (t) => {
    const persons = world.index.graph.entities
      .filter((e) => e.type === 'person')
      .map((e) => e.name.split(' ')[1]);
    t.ok(new Set(persons).size < persons.length, 'a surname is shared');
    const works = world.index.graph.entities
      .filter((e) => e.type === 'work')
      .map((e) => e.name.split(' ')[1]);
    t.ok(new Set(works).size < works.length, 'an adjective is shared by two titles');
    t.equal(
      new Set(world.index.graph.entities.map((e) => e.name)).size,
      world.index.graph.entities.length,
      'full names are unique',
    );
  });
}

t.test('a world with fewer than 20 countries is refused: guessing must score near zero', async (t) => {
  t.throws(() => validateWorldConfig({ ...TINY_WORLD, countries: 12 }), {
    name: 'WorldConfigError',
    message: /countries.*>= 20/,
  });
});

t.test('akbe world build writes the files whose digests world.json records', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-world-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const built = await runCli('world', 'build', '--seed', '11', '--size', 'tiny', '--out', dir);
  t.equal(built.code, 0);
  t.match(built.out, /world seed 11 -> .*entities.*vocab \d+/);
  t.match(built.err, /world: corpus/);
  const summary = await readWorldSummary(dir);
  for (const [path, hex] of Object.entries(summary.digests)) {
    t.equal(
      createHash('sha256')
        .update(readFileSync(join(dir, path)))
        .digest('hex'),
      hex,
      path,
    );
  }
  t.same(summary.digests, digest(new Map([...worldFiles(world)].filter(([p]) => p !== 'world.json'))));
  const dev = await readQuestions(dir, 'dev');
  t.same(
    dev.map((q) => q.id),
    world.questions.filter((q) => q.split === 'dev').map((q) => q.id),
  );
  t.ok(
    dev.every((q) => typeof q.known === 'boolean' && q.golden_answers.length > 0 && Array.isArray(q.facts)),
  );
  t.equal((await runCli('world', 'build', '--seed', 'x', '--out', dir)).code, 2);
});
