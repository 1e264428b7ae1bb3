/**
 * `akbe world build`: generates the synthetic knowledge world (corpus, question sets with oracle
 * labels, tokenizer, pretraining mix) into a directory. Same seed, same bytes.
 */
import { type CommandSpec, choiceFlag, intFlag, requireString } from '../command.js';

const SIZES = ['default', 'tiny'] as const;

export const worldCommands: CommandSpec[] = [
  {
    path: ['world', 'build'],
    summary:
      'Generate the synthetic knowledge world (corpus, questions, tokenizer, pretraining mix) into DIR',
    flags: {
      seed: { type: 'string', value: 'N', description: 'world seed', default: '0' },
      out: { type: 'string', value: 'DIR', description: 'output directory (created; files are overwritten)' },
      size: {
        type: 'string',
        value: 'SIZE',
        description: `world size: ${SIZES.join('|')} (tiny is for tests)`,
        default: 'default',
      },
    },
    async run(ctx) {
      const seed = intFlag(ctx, 'seed', { min: 0, max: 0xffffffff })!;
      const out = requireString(ctx, 'out');
      const size = choiceFlag(ctx, 'size', SIZES, 'default')!;
      const { DEFAULT_WORLD, TINY_WORLD } = await import('../../world/config.js');
      const { generateWorld } = await import('../../world/generate.js');
      const { writeWorld, worldSummary } = await import('../../world/files.js');
      const started = Date.now();
      const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
      const config = { ...(size === 'tiny' ? TINY_WORLD : DEFAULT_WORLD), seed };
      const world = generateWorld(config, {
        onStage: (stage) => ctx.err.write(`world: ${stage} (${elapsed()})\n`),
      });
      ctx.err.write(`world: writing ${out} (${elapsed()})\n`);
      await writeWorld(world, out);
      const s = worldSummary(world, {});
      const q = s.questions as Record<string, number>;
      const perSplit = (split: string) =>
        Object.entries(q).reduce((n, [k, v]) => (k.startsWith(`${split}/`) ? n + v : n), 0);
      ctx.out.write(
        `world seed ${seed} -> ${out}: ${s.entities.total} entities, ${s.facts.total} facts (${s.facts.known} known), ` +
          `${s.passages} passages, questions train ${perSplit('train')} / dev ${perSplit('dev')} / test ${perSplit('test')}, ` +
          `vocab ${s.vocabSize}, mix ${s.mix.sequences} sequences / ${s.mix.tokens} tokens (mean ${s.mix.meanLength}, max ${s.mix.maxLength}) in ${elapsed()}\n`,
      );
      return 0;
    },
  },
];
