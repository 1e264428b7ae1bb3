/**
 * A tiny world and a briefly pretrained tiny policy for the training integration tests, built once
 * and cached under .akbe/test-fixtures (about 15 s on a quiet 2-core machine). Built in a temp dir
 * and renamed into place, so concurrent test files never see half a fixture.
 */
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import type { RunSpec } from '../../src/actors/roles/roles.js';
import { type TrainConfig, validateTrainConfig } from '../../src/rl/config.js';

export const FIXTURE_DIR = resolve('.akbe/test-fixtures/tiny-run-v1');

export interface TinyRun {
  worldDir: string;
  policyDir: string;
}

export async function tinyRunFixture(): Promise<TinyRun> {
  const worldDir = join(FIXTURE_DIR, 'world');
  const policyDir = join(FIXTURE_DIR, 'policy');
  if (existsSync(join(policyDir, 'model.safetensors'))) return { worldDir, policyDir };
  mkdirSync(resolve('.akbe/test-fixtures'), { recursive: true });
  const tmp = mkdtempSync(`${FIXTURE_DIR}.tmp-`);
  const { TINY_WORLD } = await import('../../src/world/config.js');
  const { generateWorld } = await import('../../src/world/generate.js');
  const { writeWorld } = await import('../../src/world/files.js');
  const { DEFAULT_PRETRAIN } = await import('../../src/world/pretrain.js');
  const { runPretrain } = await import('../../src/jobs/pretrain-run.js');
  await writeWorld(generateWorld({ ...TINY_WORLD, seed: 1 }), join(tmp, 'world'));
  await runPretrain({
    worldDir: join(tmp, 'world'),
    outDir: join(tmp, 'policy'),
    config: { ...DEFAULT_PRETRAIN, steps: 40, batch: 32, nEmbd: 32, nLayer: 1, nHead: 2 },
    resume: false,
    checkpointEvery: 40,
    logEvery: 40,
    threads: 1,
    err: new Writable({ write: (_c, _e, cb) => cb() }),
  });
  try {
    renameSync(tmp, FIXTURE_DIR);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another test file won the race
  }
  return { worldDir, policyDir };
}

/** The tiny training config: 2 questions x (2 with-tool + 2 no-tool) rollouts per step. */
export const TINY_TRAIN: Partial<TrainConfig> = {
  algo: 'akbe',
  steps: 2,
  batchQuestions: 2,
  miniBatchQuestions: 1,
  gWithTool: 2,
  gNoTool: 2,
  maxToolCalls: 2,
  maxResponseTokens: 40,
  lr: 1e-3,
  seed: 7,
};

export function tinySpec(fx: TinyRun, over: Partial<TrainConfig> = {}): RunSpec {
  return {
    train: validateTrainConfig({ ...TINY_TRAIN, ...over }),
    worldDir: fx.worldDir,
    basePolicy: fx.policyDir,
    topK: 3,
  };
}

/**
 * The default world of seed 0 (the one assets/base was pretrained on), written once and cached
 * like the tiny fixture, for the files that read it whole (world-base, dashboard-browser) and for
 * baseRunFixture: generating and writing it is ~5 s idle, 10-20 s under coverage on a loaded
 * machine, once per suite instead of once per file. The folder name carries a digest of the
 * sources that make a world (src/world, src/text, src/retrieval, src/util), so an edit there
 * builds a new one instead of reading a stale one. Read-only: copy it to write into it.
 */
export async function seed0WorldFixture(): Promise<string> {
  const digest = createHash('sha256');
  for (const d of ['src/world', 'src/text', 'src/retrieval', 'src/util'])
    for (const f of readdirSync(resolve(d), { recursive: true, encoding: 'utf8' }).sort())
      if (f.endsWith('.ts')) digest.update(f).update(readFileSync(resolve(d, f)));
  const dir = resolve(`.akbe/test-fixtures/world-seed0-${digest.digest('hex').slice(0, 12)}`);
  if (existsSync(join(dir, 'world.json'))) return dir;
  mkdirSync(resolve('.akbe/test-fixtures'), { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  const { DEFAULT_WORLD } = await import('../../src/world/config.js');
  const { generateWorld } = await import('../../src/world/generate.js');
  const { writeWorld } = await import('../../src/world/files.js');
  const { buildWorldIndex } = await import('../../src/world/search-index.js');
  await writeWorld(generateWorld({ ...DEFAULT_WORLD, seed: 0 }), tmp);
  // As `akbe world build` does: a run would otherwise build <world>/index into the shared folder.
  await buildWorldIndex(tmp);
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another test file won the race
  }
  return dir;
}

/**
 * The committed base policy (assets/base) on the seed-0 world it was pretrained on, built once
 * and cached like the tiny fixture: a policy that answers some questions right and some wrong, so
 * boundary labels vary (the tiny policy labels everything both-wrong). The training pool is cut
 * to its first 8 questions, so a step of 6 meets questions labelled before (boundary shifts).
 */
export async function baseRunFixture(): Promise<TinyRun> {
  const dir = resolve('.akbe/test-fixtures/world-seed0-pool8');
  const policyDir = resolve('assets/base');
  if (existsSync(join(dir, 'world.json'))) return { worldDir: dir, policyDir };
  const world = await seed0WorldFixture();
  const tmp = mkdtempSync(`${dir}.tmp-`);
  cpSync(world, tmp, { recursive: true });
  const train = join(tmp, 'questions', 'train.jsonl');
  writeFileSync(train, `${readFileSync(train, 'utf8').split('\n').slice(0, 8).join('\n')}\n`);
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true });
  }
  return { worldDir: dir, policyDir };
}
