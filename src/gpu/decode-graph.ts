/**
 * A one-token decode step over a fixed-capacity KV cache, without copying the cache.
 *
 * model.ts's decode graph appends each step's keys/values with Concat and returns the grown
 * cache: every step copies the whole cache twice (the Concat, then the output to JavaScript),
 * which at batch 64 costs more than the matmuls. Here the cache is an input the runtime owns,
 * [B, H, C, hd] with capacity C fixed for the batch, and the step attends to it in two parts:
 *
 *   scores = [ q K_cache^T (masked) | q . k_new ]    [B, H, 1, C + 1]
 *   att    = softmax(scores)
 *   y      = att[:, :, :, :C] V_cache + att[:, :, :, C:] v_new
 *
 * and returns only the new keys/values [B, H, 1, hd], which the runtime writes into slot P.
 * Same GPT-2 block as model.ts (pre-LayerNorm, tanh-GELU, tied head); equality with the full
 * forward pass is tested against the float64 reference.
 */
import { type GPTConfig, gpt2ParamShapes } from './config.js';
import { Graph, ops, type Tensor } from './graph/index.js';
import {
  declareParamInputs,
  embed,
  MASKED_SCORE,
  type ParamTensors,
  param,
  type WeightsDtype,
} from './model-inputs.js';

const { add, mul, matmul, reshape, transpose } = ops;

const linear = (x: Tensor, p: ParamTensors, prefix: string) =>
  add(matmul(x, param(p, `${prefix}.weight`)), param(p, `${prefix}.bias`));

const layerNorm = (x: Tensor, p: ParamTensors, prefix: string, cfg: GPTConfig) =>
  ops.layerNorm(x, param(p, `${prefix}.weight`), param(p, `${prefix}.bias`), cfg.layer_norm_epsilon);

/**
 * Inputs: parameters; `input_ids`, `position_ids` int64 [B, 1]; `cache_mask` bool [B, C] (true =
 * a filled, real slot); `cache_key_i` / `cache_value_i` float32 [B, H, C, hd]. Outputs: `logits`
 * [B, V]; `new_key_i` / `new_value_i` [B, H, 1, hd].
 */
export function buildCachedStepGraph(cfg: GPTConfig, weights: WeightsDtype = 'float32'): Graph {
  const g = new Graph({ name: 'gpt2_decode_step_cached' });
  const p = declareParamInputs(g, gpt2ParamShapes(cfg), 'float32', weights);
  const D = cfg.n_embd;
  const H = cfg.n_head;
  const hd = D / H;
  const ids = g.input('input_ids', 'int64', ['batch', 1]);
  const pos = g.input('position_ids', 'int64', ['batch', 1]);
  const mask = ops.unsqueeze(g.input('cache_mask', 'bool', ['batch', 'capacity']), [1, 2]); // [B, 1, 1, C]
  let x = add(embed(p, 'wte.weight', ids), embed(p, 'wpe.weight', pos)); // [B, 1, D]
  const heads = (t: Tensor) => transpose(reshape(t, [0, 0, H, hd]), [0, 2, 1, 3]); // [B, H, 1, hd]
  for (let i = 0; i < cfg.n_layer; i++) {
    const h = `h.${i}`;
    const kCache = g.input(`cache_key_${i}`, 'float32', ['batch', H, 'capacity', hd]);
    const vCache = g.input(`cache_value_${i}`, 'float32', ['batch', H, 'capacity', hd]);
    const [q0, k0, v0] = ops.split(linear(layerNorm(x, p, `${h}.ln_1`, cfg), p, `${h}.attn.c_attn`), 2, [
      D,
      D,
      D,
    ]);
    const q = mul(heads(q0), 1 / Math.sqrt(hd)); // [B, H, 1, hd]
    const kNew = heads(k0);
    const vNew = heads(v0);
    const sCache = ops.where(mask, matmul(q, ops.transposeLast2(kCache)), MASKED_SCORE); // [B, H, 1, C]
    const sNew = ops.reduceSum(mul(q, kNew), [3], true); // [B, H, 1, 1]
    const att = ops.softmax(ops.concat([sCache, sNew], 3)); // [B, H, 1, C + 1]
    const aCache = ops.slice(att, [0], [-1], [3]); // [B, H, 1, C]
    const aNew = ops.slice(att, [-1], [Number.MAX_SAFE_INTEGER], [3]); // [B, H, 1, 1]
    const y = add(matmul(aCache, vCache), mul(aNew, vNew)); // [B, H, 1, hd]
    x = add(x, linear(reshape(transpose(y, [0, 2, 1, 3]), [0, 0, D]), p, `${h}.attn.c_proj`)); // [B, 1, D]
    const m = ops.gelu(linear(layerNorm(x, p, `${h}.ln_2`, cfg), p, `${h}.mlp.c_fc`), 'tanh');
    x = add(x, linear(m, p, `${h}.mlp.c_proj`)); // [B, 1, D]
    g.output(kNew, `new_key_${i}`);
    g.output(vNew, `new_value_${i}`);
  }
  const last = ops.squeeze(layerNorm(x, p, 'ln_f', cfg), [1]); // [B, D]
  g.output(ops.gemm(last, param(p, 'wte.weight'), null, { transB: true }), 'logits'); // [B, V]
  return g;
}
