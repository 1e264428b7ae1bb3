/**
 * The pretraining run behind `akbe pretrain`: loads a world's mix and tokenizer, trains a fresh
 * (or resumed) policy through PolicyRuntime, and checkpoints every N steps into the output dir:
 *
 *   OUT/config.json, model.safetensors, optimizer.safetensors   the policy (src/gpu/checkpoint.ts)
 *   OUT/tokenizer.json, tokenizer_config.json                   copied from the world
 *   OUT/pretrain.json                                           config, world digest, step, loss history
 *
 * `--resume` continues from OUT/pretrain.json's step with the saved config; the batch and lr
 * schedules depend only on the step, so the result equals an uninterrupted run's.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../gpu/checkpoint.js';
import { initParams } from '../gpu/config.js';
import { PolicyRuntime } from '../gpu/policy-runtime.js';
import type { DeviceChoice } from '../gpu/session.js';
import { Progress } from '../util/progress.js';
import { deriveSeed } from '../util/rng.js';
import { readPretrainMix, readWorldSummary, readWorldTokenizer } from '../world/files.js';
import {
  assembleBatch,
  batchSchedule,
  lrAt,
  type PretrainConfig,
  pretrainModelConfig,
} from '../world/pretrain.js';

export const PRETRAIN_STATE = 'pretrain.json';

export class PretrainStateError extends Error {
  constructor(
    readonly path: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${path}: ${problem}`, options);
    this.name = 'PretrainStateError';
  }
}

export interface PretrainRunOptions {
  worldDir: string;
  outDir: string;
  config: PretrainConfig;
  resume: boolean;
  checkpointEvery: number;
  logEvery: number;
  device?: DeviceChoice;
  threads?: number;
  /** Progress bar and log lines go here. */
  err: NodeJS.WritableStream & { isTTY?: boolean };
}

interface PretrainState {
  format: 'akbe-pretrain/1';
  config: PretrainConfig;
  /** sha256 of the world's pretraining tokens: resuming on another world is refused. */
  worldTokens: string;
  step: number;
  /** [step, mean loss over the last logEvery steps] */
  history: Array<[number, number]>;
}

export interface PretrainResult {
  step: number;
  finalLoss: number;
  tokensSeen: number;
  seconds: number;
}

/** The pretraining state and runtime: resumed from `outDir` (checked), or a fresh model. */
async function openPretrain(
  o: PretrainRunOptions,
  statePath: string,
  worldTokens: string,
  vocabSize: number,
  runtimeOpts: Parameters<typeof PolicyRuntime.create>[2],
): Promise<{ state: PretrainState; runtime: PolicyRuntime }> {
  if (existsSync(statePath)) {
    if (!o.resume)
      throw new PretrainStateError(
        statePath,
        'a pretraining run exists here; pass --resume to continue it or choose another --out',
      );
    const state = JSON.parse(await readFile(statePath, 'utf8')) as PretrainState;
    if (state.format !== 'akbe-pretrain/1')
      throw new PretrainStateError(statePath, `unknown format ${state.format}`);
    if (state.worldTokens !== worldTokens)
      throw new PretrainStateError(statePath, `was trained on another world than ${o.worldDir}`);
    state.config = { ...state.config, steps: Math.max(o.config.steps, state.config.steps) };
    return { state, runtime: await PolicyRuntime.fromCheckpoint(o.outDir, runtimeOpts) };
  }
  const cfg = pretrainModelConfig(vocabSize, o.config);
  const state: PretrainState = {
    format: 'akbe-pretrain/1',
    config: o.config,
    worldTokens,
    step: 0,
    history: [],
  };
  const runtime = await PolicyRuntime.create(
    cfg,
    initParams(cfg, deriveSeed(o.config.seed, 'init')),
    runtimeOpts,
  );
  await mkdir(o.outDir, { recursive: true });
  return { state, runtime };
}

export async function runPretrain(o: PretrainRunOptions): Promise<PretrainResult> {
  const summary = await readWorldSummary(o.worldDir);
  const tok = await readWorldTokenizer(o.worldDir);
  const mix = await readPretrainMix(o.worldDir);
  const worldTokens = summary.digests['pretrain/tokens.u16'];
  const statePath = join(o.outDir, PRETRAIN_STATE);
  const runtimeOpts = {
    device: o.device ?? 'cpu',
    intraOpThreads: o.threads,
    trainer: { aggregation: 'token-mean' as const, akbeLoss: 'nll' as const },
  };

  const { state, runtime } = await openPretrain(o, statePath, worldTokens, tok.size, runtimeOpts);
  const cfg = state.config;
  const schedule = batchSchedule(mix, cfg);
  const started = Date.now();
  // The bar counts this invocation's steps (a resumed run's rate and eta stay honest); the loss
  // lines give the global step.
  const progress = new Progress(`pretrain steps ${state.step + 1}..${cfg.steps}`, {
    total: cfg.steps - state.step,
    stream: o.err,
  });
  let window: number[] = [];
  let last = Number.NaN;
  let tokensSeen = 0;
  const save = async () => {
    await runtime.saveCheckpoint(o.outDir);
    for (const f of ['tokenizer.json', 'tokenizer_config.json'])
      await copyFile(join(o.worldDir, f), join(o.outDir, f));
    await writeFileAtomic(statePath, `${JSON.stringify(state, null, 1)}\n`);
  };
  try {
    for (let step = state.step + 1; step <= cfg.steps; step++) {
      const planned = schedule[step - 1];
      const batch = assembleBatch(mix, planned, tok.pad);
      const hyper = { lr: lrAt(step, cfg), lambda: 1, weightDecay: cfg.weightDecay };
      const m = await runtime.trainStep({ batch, hyper });
      if (!Number.isFinite(m.akbeLoss))
        throw new Error(`pretrain: loss is ${m.akbeLoss} at step ${step}; lower --lr`);
      last = m.akbeLoss;
      window.push(m.akbeLoss);
      tokensSeen += planned.sequences.reduce((n, s) => n + mix.offsets[s + 1] - mix.offsets[s], 0);
      state.step = step;
      progress.tick();
      if (step % o.logEvery === 0 || step === cfg.steps) {
        const mean = window.reduce((a, b) => a + b, 0) / window.length;
        state.history.push([step, Math.round(mean * 1e4) / 1e4]);
        window = [];
        const line = `step ${step}/${cfg.steps} loss ${mean.toFixed(4)} lr ${hyper.lr.toExponential(2)} ${((Date.now() - started) / 1000).toFixed(0)}s`;
        o.err.write(o.err.isTTY ? `\r${line.padEnd(100)}\n` : `${line}\n`);
      }
      if (step % o.checkpointEvery === 0 || step === cfg.steps) await save();
    }
    progress.finish();
  } finally {
    await runtime.close();
  }
  return { step: state.step, finalLoss: last, tokensSeen, seconds: (Date.now() - started) / 1000 };
}
