/**
 * `akbe world build`: generates the synthetic knowledge world (corpus, question sets with oracle
 * labels, tokenizer, pretraining mix) into a directory. Same seed, same bytes.
 * Its modules load inside `run` (dynamic imports; src/cli/registry.ts says why).
 */
import { type CommandSpec, choiceFlag, intFlag, numberFlag, requireString } from '../command.js';
import { WEIGHTS_DTYPE_FLAG, weightsDtypeFlag } from '../common-flags.js';

const SIZES = ['default', 'tiny'] as const;
/** The keys of WORLD_PRESETS (src/world/config.ts), listed here so that --help loads no world code. */
const PRESETS = ['default', 'hard'] as const;
const SPLIT_CHOICES = ['train', 'dev', 'test'] as const;

const DEVICE_FLAGS = {
  device: { type: 'string', value: 'D', description: 'cpu | webgpu | cuda | auto', default: 'cpu' },
  threads: {
    type: 'string',
    value: 'N',
    description: 'ORT intra-op threads (0 = one per core)',
    default: '1',
  },
} as const;

export const worldCommands: CommandSpec[] = [
  {
    path: ['world', 'build'],
    summary:
      'Generate the synthetic knowledge world (corpus, questions, tokenizer, pretraining mix, search index) into DIR',
    flags: {
      seed: { type: 'string', value: 'N', description: 'world seed', default: '0' },
      out: { type: 'string', value: 'DIR', description: 'output directory (created; files are overwritten)' },
      size: {
        type: 'string',
        value: 'SIZE',
        description: `world size: ${SIZES.join('|')} (tiny is for tests)`,
        default: 'default',
      },
      preset: {
        type: 'string',
        value: 'P',
        description: `world recipe: ${PRESETS.join('|')} (hard: more multi-hop, decoy passages, more unknown facts; docs/world.md)`,
        default: 'default',
      },
    },
    async run(ctx) {
      const seed = intFlag(ctx, 'seed', { min: 0, max: 0xffffffff })!;
      const out = requireString(ctx, 'out');
      const size = choiceFlag(ctx, 'size', SIZES, 'default')!;
      const preset = choiceFlag(ctx, 'preset', PRESETS, 'default')!;
      const { presetConfig } = await import('../../world/config.js');
      const { generateWorld } = await import('../../world/generate.js');
      const { writeWorld, worldSummary } = await import('../../world/files.js');
      const started = Date.now();
      const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
      const config = presetConfig(preset, size, seed);
      const world = generateWorld(config, {
        onStage: (stage) => ctx.err.write(`world: ${stage} (${elapsed()})\n`),
      });
      ctx.err.write(`world: writing ${out} (${elapsed()})\n`);
      await writeWorld(world, out);
      // The search index training serves from (same as `akbe index build --corpus OUT/corpus.jsonl --out OUT/index`).
      const { buildWorldIndex, worldIndexDir } = await import('../../world/search-index.js');
      ctx.err.write(`world: indexing the corpus into ${worldIndexDir(out)} (${elapsed()})\n`);
      await buildWorldIndex(out);
      const s = worldSummary(world, {});
      const q = s.questions as Record<string, number>;
      const perSplit = (split: string) =>
        Object.entries(q).reduce((n, [k, v]) => (k.startsWith(`${split}/`) ? n + v : n), 0);
      ctx.out.write(
        `world ${preset === 'default' ? '' : `${preset} `}seed ${seed} -> ${out}: ${s.entities.total} entities, ${s.facts.total} facts (${s.facts.known} known), ` +
          `${s.passages} passages, questions train ${perSplit('train')} / dev ${perSplit('dev')} / test ${perSplit('test')}, ` +
          `vocab ${s.vocabSize}, mix ${s.mix.sequences} sequences / ${s.mix.tokens} tokens (mean ${s.mix.meanLength}, max ${s.mix.maxLength}) in ${elapsed()}\n`,
      );
      return 0;
    },
  },
  {
    path: ['pretrain'],
    summary: "Pretrain the base policy on a world's mix (resumable; checkpoints every N steps)",
    flags: {
      world: { type: 'string', value: 'DIR', description: 'world directory (akbe world build)' },
      out: { type: 'string', value: 'DIR', description: 'checkpoint directory' },
      steps: { type: 'string', value: 'N', description: 'optimizer steps', default: '2000' },
      batch: { type: 'string', value: 'N', description: 'sequences per step', default: '64' },
      lr: {
        type: 'string',
        value: 'X',
        description: 'peak learning rate (warmup, then cosine to 10%)',
        default: '3e-3',
      },
      warmup: { type: 'string', value: 'N', description: 'warmup steps', default: '40' },
      seed: { type: 'string', value: 'N', description: 'init and data-order seed', default: '0' },
      'n-embd': { type: 'string', value: 'N', description: 'model width', default: '64' },
      'n-layer': { type: 'string', value: 'N', description: 'transformer blocks', default: '2' },
      'n-head': { type: 'string', value: 'N', description: 'attention heads', default: '4' },
      context: {
        type: 'string',
        value: 'N',
        description: "the policy's context (default: the world's longest sequence, mix.maxSequenceTokens)",
      },
      'checkpoint-every': {
        type: 'string',
        value: 'N',
        description: 'steps between checkpoints',
        default: '100',
      },
      'log-every': { type: 'string', value: 'N', description: 'steps between loss lines', default: '25' },
      resume: { type: 'boolean', description: 'continue the run in --out from its last checkpoint' },
      ...DEVICE_FLAGS,
    },
    async run(ctx) {
      const { DEVICE_CHOICES } = await import('../../gpu/session.js');
      const { bucketsFor, DEFAULT_PRETRAIN } = await import('../../world/pretrain.js');
      const { runPretrain } = await import('../../jobs/pretrain-run.js');
      const { readWorldSummary } = await import('../../world/files.js');
      const int = (name: string, min = 1) => intFlag(ctx, name, { min })!;
      const worldDir = requireString(ctx, 'world');
      const context =
        intFlag(ctx, 'context', { min: 8 }) ??
        (await readWorldSummary(worldDir)).config.mix.maxSequenceTokens;
      const config = {
        ...DEFAULT_PRETRAIN,
        steps: int('steps'),
        batch: int('batch'),
        lr: numberFlag(ctx, 'lr', { min: 0 })!,
        warmup: int('warmup', 0),
        seed: int('seed', 0),
        nEmbd: int('n-embd'),
        nLayer: int('n-layer'),
        nHead: int('n-head'),
        buckets: bucketsFor(context),
      };
      const r = await runPretrain({
        worldDir,
        outDir: requireString(ctx, 'out'),
        config,
        resume: ctx.flags.resume === true,
        checkpointEvery: int('checkpoint-every'),
        logEvery: int('log-every'),
        device: choiceFlag(ctx, 'device', DEVICE_CHOICES, 'cpu'),
        threads: int('threads', 0),
        err: ctx.err as NodeJS.WritableStream & { isTTY?: boolean },
      });
      ctx.out.write(
        `pretrained to step ${r.step}: loss ${r.finalLoss.toFixed(4)}, ${r.tokensSeen} tokens in ${r.seconds.toFixed(0)}s -> ${ctx.flags.out}\n`,
      );
      return 0;
    },
  },
  {
    path: ['eval'],
    summary:
      "Evaluate a policy on a world split (all of test by default), both paths, through training's rollout machine: EM, TC, TP, pass@k and knowledge-boundary metrics",
    flags: {
      checkpoint: { type: 'string', value: 'DIR', description: 'policy checkpoint (akbe pretrain)' },
      world: { type: 'string', value: 'DIR', description: 'world directory' },
      split: { type: 'string', value: 'S', description: SPLIT_CHOICES.join(' | '), default: 'test' },
      temperature: {
        type: 'string',
        value: 'T',
        description: 'sampling temperature (0 = greedy)',
        default: '1',
      },
      seed: { type: 'string', value: 'N', description: 'sampling seed', default: '0' },
      samples: { type: 'string', value: 'K', description: 'rollouts per question and path', default: '1' },
      limit: { type: 'string', value: 'N', description: 'evaluate the first N questions of the split only' },
      batch: {
        type: 'string',
        value: 'N',
        description: 'rollouts in flight at once (the policy decodes them together)',
        default: '128',
      },
      'max-tool-calls': {
        type: 'string',
        value: 'N',
        description: "searches per with-tool rollout (a run's maxToolCalls)",
        default: '6',
      },
      'max-response-tokens': {
        type: 'string',
        value: 'N',
        description:
          "generated + observation tokens per rollout (a run's maxResponseTokens; default: the context)",
      },
      json: { type: 'string', value: 'FILE', description: 'also write the report and every rollout as JSON' },
      ...DEVICE_FLAGS,
      ...WEIGHTS_DTYPE_FLAG,
    },
    async run(ctx) {
      const { DEVICE_CHOICES } = await import('../../gpu/session.js');
      const split = choiceFlag(ctx, 'split', SPLIT_CHOICES, 'test')!;
      const temperature = numberFlag(ctx, 'temperature', { min: 0, fallback: 1 })!;
      const seed = intFlag(ctx, 'seed', { min: 0 })!;
      const samples = intFlag(ctx, 'samples', { min: 1, max: 64 })!;
      const limit = intFlag(ctx, 'limit', { min: 1 });
      const batch = intFlag(ctx, 'batch', { min: 1 })!;
      const checkpoint = requireString(ctx, 'checkpoint');
      const worldDir = requireString(ctx, 'world');
      const { runEval } = await import('../../jobs/eval-run.js');
      const out = await runEval({
        checkpoint,
        worldDir,
        split,
        temperature,
        seed,
        samples,
        limit,
        batch,
        maxToolCalls: intFlag(ctx, 'max-tool-calls', { min: 0 }) ?? 6,
        maxResponseTokens: intFlag(ctx, 'max-response-tokens', { min: 1 }),
        device: choiceFlag(ctx, 'device', DEVICE_CHOICES, 'cpu'),
        threads: intFlag(ctx, 'threads', { min: 0 })!,
        weights: await weightsDtypeFlag(ctx, checkpoint),
        json: typeof ctx.flags.json === 'string' ? ctx.flags.json : undefined,
        err: ctx.err,
      });
      ctx.out.write(out);
      return 0;
    },
  },
];
