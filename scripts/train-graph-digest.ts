/**
 * One sha256 over the serialized training graph (src/gpu/train-step.ts) for every combination of
 * its options on a tiny GPT-2 and a tiny Qwen3: run it before and after a refactor of the graph
 * builders and compare the last line (a pure restructuring must leave every byte in place).
 *
 *   node --import=./test/helpers/ts-register.mjs scripts/train-graph-digest.ts [--each]
 *
 * prints `<combinations> <sha256>` (with --each also one `<sha256> <options>` line per graph).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type PolicyConfig, parsePolicyConfig } from '../src/gpu/architecture.js';
import type { GPTConfig } from '../src/gpu/config.js';
import { AGGREGATIONS } from '../src/gpu/losses.js';
import { buildTrainGraph, type TrainGraphOptions } from '../src/gpu/train-step.js';
import { ONE_BLOCK_CFG } from '../test/helpers/tiny-policy.js';

const gpt: GPTConfig = ONE_BLOCK_CFG;
const qwen3 = parsePolicyConfig({
  ...JSON.parse(readFileSync(new URL('../bench/configs/tiny-qwen3.json', import.meta.url), 'utf8')),
  num_hidden_layers: 1,
});

/** Every value of each option (undefined = the default). */
const AXES: { [K in keyof TrainGraphOptions]?: ReadonlyArray<TrainGraphOptions[K]> } = {
  dtype: [undefined, 'float64'],
  aggregation: [undefined, ...AGGREGATIONS],
  akbeLoss: [undefined, 'clipped'],
  dualClip: [undefined, false],
  logRatioClamp: [undefined, false],
  decoupled: [undefined, true],
  dpo: [undefined, true],
  gradOutputs: [undefined, true],
  optimizer: [undefined, 'host'],
  logitsChunk: [undefined, 4],
};

function* combinations(): Generator<Partial<TrainGraphOptions>> {
  const keys = Object.keys(AXES) as Array<keyof TrainGraphOptions>;
  const rec = function* (k: number, acc: Partial<TrainGraphOptions>): Generator<Partial<TrainGraphOptions>> {
    if (k === keys.length) return yield acc;
    for (const v of AXES[keys[k]]!) yield* rec(k + 1, v === undefined ? acc : { ...acc, [keys[k]]: v });
  };
  yield* rec(0, {});
}

const each = process.argv.includes('--each');
const all = createHash('sha256');
let n = 0;
for (const [name, cfg] of [
  ['gpt2', gpt],
  ['qwen3', qwen3],
] as Array<[string, PolicyConfig]>) {
  for (const o of combinations()) {
    const bytes = buildTrainGraph(cfg, { batch: 3, seq: 6, ...o }).serialize();
    all.update(bytes);
    n++;
    if (each) console.log(createHash('sha256').update(bytes).digest('hex'), name, JSON.stringify(o));
  }
}
console.log(n, all.digest('hex'));
