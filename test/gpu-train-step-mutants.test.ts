/**
 * The training-step graph's contract as train-step.ts documents it: its name, every input and
 * output name with dtype and shape, and the optional ones (`decoupled`, `gradOutputs`) appearing
 * only when asked (issue 16, mutation testing: the numeric tests in gpu-train.test.ts run the
 * graph but never look at what else it declares). Building only: no session is created.
 */
import t from 'tap';
import type { GPTConfig } from '../src/gpu/config.js';
import { buildTrainGraph, decays, HYPER_INPUTS, METRIC_OUTPUTS } from '../src/gpu/train-step.js';

const tiny: GPTConfig = {
  vocab_size: 7,
  n_embd: 8,
  n_layer: 1,
  n_head: 2,
  n_positions: 6,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};

/** GPT-2's 12 parameter tensors of one layer, written out (src/gpu/config.ts gpt2ParamShapes). */
const PARAMS = [
  'wte.weight',
  'wpe.weight',
  'h.0.ln_1.weight',
  'h.0.ln_1.bias',
  'h.0.attn.c_attn.weight',
  'h.0.attn.c_attn.bias',
  'h.0.attn.c_proj.weight',
  'h.0.attn.c_proj.bias',
  'h.0.ln_2.weight',
  'h.0.ln_2.bias',
  'h.0.mlp.c_fc.weight',
  'h.0.mlp.c_fc.bias',
  'h.0.mlp.c_proj.weight',
  'h.0.mlp.c_proj.bias',
  'ln_f.weight',
  'ln_f.bias',
];

const sig = (ts: { name: string; dtype: string; shape: unknown[] }[]) =>
  Object.fromEntries(ts.map((x) => [x.name, `${x.dtype} [${x.shape.join(', ')}]`]));

t.test('inputs: parameters, both AdamW moments, the batch and the scalar hyperparameters', async (t) => {
  const g = buildTrainGraph(tiny, { batch: 3, seq: 5 });
  t.equal(g.name, 'gpt2_train_step');
  const ins = sig(g.inputs);
  t.strictSame(
    Object.keys(ins)
      .filter((n) => !n.includes('.'))
      .sort(),
    [
      ...HYPER_INPUTS,
      'advantages',
      'akbe_weight',
      'input_ids',
      'loss_mask',
      'old_logprobs',
      'pg_weight',
    ].sort(),
  );
  t.equal(ins.input_ids, 'int64 [3, 5]');
  t.equal(ins.loss_mask, 'float32 [3, 4]');
  t.equal(ins.old_logprobs, 'float32 [3, 4]');
  t.equal(ins.advantages, 'float32 [3]');
  t.equal(ins.pg_weight, 'float32 [3]');
  t.equal(ins.akbe_weight, 'float32 [3]');
  for (const h of HYPER_INPUTS) t.equal(ins[h], 'float32 []', h);
  t.equal(ins['wte.weight'], 'float32 [7, 8]');
  t.equal(ins['adam_m.wte.weight'], 'float32 [7, 8]');
  t.equal(ins['adam_v.h.0.ln_1.bias'], 'float32 [8]');
  for (const p of PARAMS) {
    t.ok(p in ins, p);
    t.ok(`adam_m.${p}` in ins && `adam_v.${p}` in ins, `moments of ${p}`);
  }
  t.notOk('prox_logprobs' in ins || 'behaviour_weight_cap' in ins, 'coupled: no proximal inputs');
});

t.test('outputs: metrics, logprobs, the updated parameters and moments; grads only when asked', async (t) => {
  const g = buildTrainGraph(tiny, { batch: 2, seq: 4, dtype: 'float64' });
  const outs = sig(g.outputs);
  const names = Object.keys(outs);
  for (const m of METRIC_OUTPUTS) t.equal(outs[m], 'float64 []', m);
  t.equal(outs.logprobs, 'float64 [2, 3]');
  for (const p of PARAMS)
    for (const k of ['new', 'new_adam_m', 'new_adam_v']) t.ok(`${k}.${p}` in outs, `${k}.${p}`);
  t.equal(names.length, METRIC_OUTPUTS.length + 1 + 3 * PARAMS.length, 'nothing else');
  t.notOk(
    names.some((n) => n.startsWith('grad.')),
    'no gradients without gradOutputs',
  );
  t.equal(sig(g.inputs).loss_mask, 'float64 [2, 3]', 'the dtype option reaches the inputs');

  const withGrads = buildTrainGraph(tiny, { batch: 2, seq: 4, gradOutputs: true });
  const gn = withGrads.outputs.map((o) => o.name).filter((n) => n.startsWith('grad.'));
  t.strictSame(gn.sort(), PARAMS.map((p) => `grad.${p}`).sort());
});

t.test('decoupled: prox_logprobs [B, T-1] and the scalar behaviour_weight_cap', async (t) => {
  const ins = sig(buildTrainGraph(tiny, { batch: 2, seq: 4, decoupled: true }).inputs);
  t.equal(ins.prox_logprobs, 'float32 [2, 3]');
  t.equal(ins.behaviour_weight_cap, 'float32 []');
});

t.test('decays: matrices and embeddings only', async (t) => {
  t.equal(decays([7, 8]), true);
  t.equal(decays([2, 3, 4]), true);
  t.equal(decays([8]), false);
  t.equal(decays([]), false);
});

t.test('dpo: pair slots [B, B], per-pair weight and reference logprobs [B], a scalar beta', async (t) => {
  const ins = sig(buildTrainGraph(tiny, { batch: 2, seq: 4, dpo: true }).inputs);
  t.equal(ins.dpo_pairs, 'float32 [2, 2]');
  t.equal(ins.dpo_weight, 'float32 [2]');
  t.equal(ins.ref_logprobs, 'float32 [2]');
  t.equal(ins.dpo_beta, 'float32 []');
  const plain = sig(buildTrainGraph(tiny, { batch: 2, seq: 4 }).inputs);
  t.notOk(
    ['dpo_pairs', 'dpo_weight', 'ref_logprobs', 'dpo_beta'].some((n) => n in plain),
    'only when asked',
  );
});

t.test('the loss options reach the graph: each form builds other nodes than the defaults', async (t) => {
  const ops = (o: Parameters<typeof buildTrainGraph>[1]) =>
    buildTrainGraph(tiny, o).nodes.map((n) => n.opType);
  const base = { batch: 2, seq: 4 };
  const defaults = ops(base);
  t.strictSame(
    ops({ ...base, aggregation: 'token-mean', akbeLoss: 'nll' }),
    defaults,
    'token-mean and nll are the defaults',
  );
  t.notSame(ops({ ...base, aggregation: 'seq-mean-token-mean' }), defaults, 'aggregation');
  t.notSame(ops({ ...base, akbeLoss: 'clipped' }), defaults, 'the AKBE form');
});
