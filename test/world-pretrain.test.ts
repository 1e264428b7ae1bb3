import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { presetConfig, WORLD_PRESETS, type WorldPreset } from '../src/world/config.js';
import { readPretrainMix, writeWorld } from '../src/world/files.js';
import { generateWorld } from '../src/world/generate.js';
import { mixSequence } from '../src/world/pretrain-data.js';

// The oracle and the mix's rules hold for every preset (tiny size): the hard preset's decoy
// passages of tail entities are tail passages too, and stay out of the mix.
for (const preset of Object.keys(WORLD_PRESETS) as WorldPreset[]) {
  const world = generateWorld(presetConfig(preset, 'tiny', 3));
  const { mix, tokenizer: tok, index } = world;
  const n = mix.kinds.length;
  const decoded = Array.from({ length: n }, (_, s) => tok.decode(mixSequence(mix, s).tokens));
  const allText = decoded.join('\n');
  const factText = decoded.filter((_, s) => mixSequence(mix, s).kind === 'facts').join(' ');

  t.test(`${preset}: loss masks are 0 exactly on <bos>, the prompt and the observation blocks`, async (t) => {
    const think = tok.tag['<think>'];
    const infoOpen = tok.tag['<information>'];
    const infoClose = tok.tag['</information>'];
    let problems = 0;
    for (let s = 0; s < n; s++) {
      const { tokens, mask, kind } = mixSequence(mix, s);
      // Expected: 0 up to the first <think> (demonstrations) or on <bos> only (fact text); 0 from
      // <information> through </information>; 1 everywhere else.
      let inPrompt = kind !== 'facts';
      let inObs = false;
      for (let i = 0; i < tokens.length; i++) {
        if (tokens[i] === think) inPrompt = false;
        if (tokens[i] === infoOpen) inObs = true;
        const want = i === 0 || inPrompt || inObs ? 0 : 1;
        if (mask[i] !== want) problems++;
        if (tokens[i] === infoClose) inObs = false;
      }
      if (tokens[0] !== tok.bos) problems++;
    }
    t.equal(problems, 0);
    t.ok(
      decoded.some((d) => d.includes('<information> Doc 1(Title:')),
      'observations are present',
    );
  });

  t.test(
    `${preset}: known facts are in the fact text; unknown facts of the splits and tail passages appear nowhere in the mix`,
    async (t) => {
      const leaks: string[] = [];
      for (const q of world.questions) {
        for (const id of q.facts) {
          const sentence = index.sentence(index.factById.get(id)!);
          if (q.known && !factText.includes(sentence)) leaks.push(`known fact missing: ${sentence}`);
          if (!q.known && factText.includes(sentence))
            leaks.push(`unknown fact in the fact text: ${sentence}`);
          if (!q.known && q.split !== 'demo' && allText.includes(sentence))
            leaks.push(`unknown fact in the mix: ${sentence}`);
        }
      }
      for (const p of world.passages) {
        const e = index.entity.get(p.entity)!;
        const text = p.contents.slice(p.contents.indexOf('\n') + 1);
        if (e.role === 'tail' && allText.includes(text)) leaks.push(`tail passage ${p.id}`);
        if (e.role === 'tail' && allText.includes(`(Title: ${e.name})`)) leaks.push(`tail title ${e.name}`);
      }
      t.same(leaks, []);
      t.ok(
        world.questions.filter((q) => q.known).length > 20 &&
          world.questions.filter((q) => !q.known).length > 20,
      );
    },
  );

  t.test(
    `${preset}: an unknown question of a split is never followed by its gold answer in the mix`,
    async (t) => {
      const byId = new Map(world.questions.map((q) => [q.id, q]));
      const leaks: string[] = [];
      let checked = 0;
      for (const d of world.demos) {
        const q = d.questionId ? byId.get(d.questionId)! : null;
        if (!q || q.known || q.split === 'demo' || q.hop === 'compare') continue;
        const text = d.segments.map((s) => s.text).join(' ');
        for (const a of q.golden_answers)
          if (text.includes(`<answer> ${a} </answer>`)) leaks.push(`${q.id}: ${a}`);
        checked++;
      }
      t.same(leaks, []);
      t.ok(checked > 50, `${checked} demonstrations checked`);
    },
  );

  t.test(`${preset}: tail names appear in question -> search contexts, without facts`, async (t) => {
    const prefixes = world.demos.filter((d) => d.kind === 'wt-prefix');
    t.ok(prefixes.length > 0);
    const bad = prefixes.filter(
      (d) => d.eos || !/<search> [^<]+ <\/search>$/.test(d.segments.map((s) => s.text).join(' ')),
    );
    t.same(bad, [], 'every prefix ends at its search call');
    const tailTopics = new Set(
      world.questions.filter((q) => !q.known && q.split !== 'demo').map((q) => q.entities[0]),
    );
    const inPrefix = new Set(
      prefixes.map((d) => world.questions.find((q) => q.id === d.questionId)!.entities[0]),
    );
    t.ok(
      inPrefix.size / tailTopics.size > 0.6,
      `${inPrefix.size} of ${tailTopics.size} tail topics appear in a search context`,
    );
  });

  t.test(
    `${preset}: with-tool demonstrations search at the configured rates on known and unknown questions`,
    async (t) => {
      const byId = new Map(world.questions.map((q) => [q.id, q]));
      const rate = (known: boolean) => {
        const wt = world.demos.filter(
          (d) => d.kind.startsWith('wt-') && byId.get(d.questionId!)!.known === known,
        );
        return wt.filter((d) => d.kind === 'wt-search' || d.kind === 'wt-prefix').length / wt.length;
      };
      t.ok(Math.abs(rate(true) - world.config.mix.searchKnown) < 0.1, `known ${rate(true)}`);
      t.ok(Math.abs(rate(false) - world.config.mix.searchUnknown) < 0.1, `unknown ${rate(false)}`);
      const wrong = world.demos
        .filter((d) => d.kind === 'wt-direct' || d.kind === 'nt-known')
        .filter(
          (d) =>
            !d.segments[1].text.endsWith(`<answer> ${byId.get(d.questionId!)!.golden_answers[0]} </answer>`),
        );
      t.same(wrong, [], 'every direct answer is correct');
    },
  );

  t.test(`${preset}: the mix is shuffled, bounded in length and round-trips through its files`, async (t) => {
    const kinds = Array.from(mix.kinds);
    t.not(
      kinds.slice(0, 20).every((k) => k === kinds[0]),
      true,
      'kinds are interleaved',
    );
    t.same(
      [...world.mixOrder].sort((a, b) => a - b),
      [...world.demos.keys()],
      'the order is a permutation',
    );
    let longest = 0;
    for (let s = 0; s < n; s++) longest = Math.max(longest, mix.offsets[s + 1] - mix.offsets[s]);
    t.ok(longest <= world.config.mix.maxSequenceTokens, `longest ${longest}`);
    const dir = mkdtempSync(join(tmpdir(), 'akbe-mix-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    await writeWorld(world, dir);
    const back = await readPretrainMix(dir);
    t.same(Array.from(back.tokens), Array.from(mix.tokens));
    t.same(Array.from(back.mask), Array.from(mix.mask));
    t.same(Array.from(back.offsets), Array.from(mix.offsets));
    t.same(Array.from(back.kinds), Array.from(mix.kinds));
  });
}
