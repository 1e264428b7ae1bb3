/**
 * Mutation testing of the pure core (docs/TESTING.md). One scope per folder, because a run over
 * everything is long on 2 cores; `MUTATE_SCOPE` picks them (comma-separated, default all):
 *
 *   MUTATE_SCOPE=rl npm run mutate                   # one folder
 *   MUTATE_SCOPE=rl npm run mutate -- --force        # ignore the last run's results (runs are incremental)
 *   npm run mutate -- --mutate src/rl/reward.ts      # one file (keeps the scope's test files)
 *   MUTATE_SCOPE=rl npm run mutate -- --mutate src/rl/reward.ts:40-60   # the lines you changed
 *
 * Incremental runs reuse results only across source changes: the tap runner names tests by their
 * index among the scope's test files, so adding a test file re-runs everything, and an edited
 * test file is not detected (docs/TESTING.md). After test changes use --force or line ranges.
 *
 * The tap runner runs each compiled test file with plain node; coverage is per test file, so a
 * mutant runs only the files that reach it.
 */
const SCOPES = {
  rl: {
    mutate: ['src/rl/**/*.ts'],
    // text-token-span: toolCallChars (format.ts), the character span of a turn's tool call.
    tests: [
      'test/rl-*.test.ts',
      'test/train-config.test.ts',
      'test/machines-learner.test.ts',
      'test/text-token-span.test.ts',
    ],
  },
  machines: {
    mutate: ['src/machines/**/*.ts'],
    // Not inspect-replay: it replays a whole fixture log (13 s a run) and so every mutant here;
    // it tests src/actors/inspect/inspect-replay.ts, the machines' own files test them in about 2 s each.
    tests: ['test/machines-*.test.ts', 'test/audit-sink.test.ts'],
  },
  events: {
    mutate: [
      'src/events/codec.ts',
      'src/events/catalog.ts',
      'src/events/projection.ts',
      'src/events/projections/**/*.ts',
    ],
    tests: [
      'test/events-projections.test.ts',
      'test/events-catalog-mutants.test.ts',
      'test/events-codec.test.ts',
      'test/edge-validators.test.ts',
      'test/events-rollout-result.test.ts',
      'test/events-store.int.test.ts',
    ],
  },
  gpu: {
    mutate: ['src/gpu/losses.ts', 'src/gpu/sampler.ts', 'src/gpu/train-step.ts'],
    // gpu-train-decoupled: the decoupled form of losses.ts (hand-worked values, reference, eta = 0).
    tests: [
      'test/gpu-sampler-mutants.test.ts',
      'test/gpu-train-step-mutants.test.ts',
      'test/gpu-loss-mutants.test.ts',
      'test/gpu-runtime-sampler.test.ts',
      'test/gpu-train-loss.test.ts',
      'test/gpu-train-decoupled.test.ts',
      'test/gpu-dpo-loss.test.ts',
      'test/gpu-train.test.ts',
    ],
  },
  index: {
    mutate: ['src/retrieval/http.ts', 'src/retrieval/observation.ts'],
    tests: ['test/index-http.test.ts', 'test/index-observation.test.ts', 'test/index-backpressure.test.ts'],
  },
  util: {
    mutate: ['src/util/rng.ts'],
    tests: ['test/rng.test.ts'],
  },
};

const names = (process.env.MUTATE_SCOPE ?? Object.keys(SCOPES).join(','))
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const n of names)
  if (!(n in SCOPES))
    throw new Error(
      `MUTATE_SCOPE: unknown scope '${n}'; use one or more of ${Object.keys(SCOPES).join(', ')}`,
    );
const tag = names.join('+');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'tap',
  // Compiled once per run in the sandbox (the mutants are all in the code, switched at run time),
  // so each test file then starts in about a second instead of ~13 s of ts-node compilation.
  buildCommand: 'node scripts/stryker-build.mjs',
  tap: {
    testFiles: names
      .flatMap((n) => SCOPES[n].tests)
      .map((f) => `.stryker-build/${f.replace(/\.ts$/, '.js')}`),
    forceBail: true,
  },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  mutate: names.flatMap((n) => SCOPES[n].mutate),
  coverageAnalysis: 'perTest',
  concurrency: Number(process.env.MUTATE_CONCURRENCY ?? 2),
  timeoutMS: 30_000,
  timeoutFactor: 2,
  ignoreStatic: true,
  // bench/ stays out of the sandbox but for what gpu tests read: the sampler's verbatim baseline
  // and the tiny Hugging Face configs (bench/configs, copied beside the compiled tests).
  ignorePatterns: [
    'dist',
    'coverage',
    '.tap',
    'reports',
    'bench',
    '!bench/sampler-baseline.ts',
    '!bench/configs',
    '.stryker-build',
  ],
  // Every run writes its results and the next one reuses them (`--force` re-tests everything).
  incremental: true,
  incrementalFile: `reports/stryker-incremental-${tag}.json`,
  reporters: ['clear-text', 'progress-append-only', 'json'],
  jsonReporter: { fileName: `reports/mutation-${tag}.json` },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
