/**
 * The GPT graphs: KV-cache decoding reproduces the full forward pass (every position, left-padded
 * rows included), and logprobs are the log-softmax of the logits at the next token.
 */
import ort from 'onnxruntime-node';
import t from 'tap';
import { type GPTConfig, gpt2ParamShapes, type Params } from '../src/gpu/config.js';
import { buildDecodeGraph, buildForwardGraph } from '../src/gpu/policy-graphs.js';
import { Rng } from '../src/util/rng.js';

const cfg: GPTConfig = {
  vocab_size: 13,
  n_embd: 16,
  n_layer: 2,
  n_head: 2,
  n_positions: 12,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};

/** Larger-than-GPT-2 weights so logits vary enough for the comparisons to mean something. */
function randomParams(seed: number): Params {
  const rng = new Rng(seed);
  return new Map(
    gpt2ParamShapes(cfg).map(({ name, shape }) => {
      const n = shape.reduce((a, b) => a * b, 1);
      const base = name.includes('ln_') && name.endsWith('.weight') ? 1 : 0;
      return [name, Float32Array.from({ length: n }, () => base + 0.3 * rng.normal())];
    }),
  );
}

function paramFeeds(p: Params): Record<string, ort.Tensor> {
  return Object.fromEntries(
    gpt2ParamShapes(cfg).map(({ name, shape }) => [name, new ort.Tensor('float32', p.get(name)!, shape)]),
  );
}

const int64 = (v: number[], dims: number[]) => new ort.Tensor('int64', BigInt64Array.from(v, BigInt), dims);
const bool = (v: number[], dims: number[]) => new ort.Tensor('bool', Uint8Array.from(v), dims);

// Two rows of length 7: row 1 is left-padded by 3 (pad id 0, masked out).
const B = 2;
const T = 7;
const ids = [1, 5, 7, 2, 9, 12, 3, 0, 0, 0, 4, 11, 6, 8];
const mask = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1];
// Positions count real tokens only (row 1's first real token has position 0).
const pos = [0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 1, 2, 3];

t.test(
  'KV-cache decoding gives the full forward logits at every position, left padding included',
  async (t) => {
    const params = randomParams(3);
    const full = await ort.InferenceSession.create(
      buildForwardGraph(cfg, { logits: true, padding: true }).serialize(),
    );
    const dec = await ort.InferenceSession.create(buildDecodeGraph(cfg).serialize());
    const ref = await full.run({
      ...paramFeeds(params),
      input_ids: int64(ids, [B, T]),
      attention_mask: bool(mask, [B, T]),
      position_ids: int64(pos, [B, T]),
    });
    const refLogits = ref.logits.data as Float32Array; // [B, T, V]
    const V = cfg.vocab_size;
    const hd = cfg.n_embd / cfg.n_head;
    const col = (a: number[], from: number, to: number) =>
      [0, 1].flatMap((b) => a.slice(b * T + from, b * T + to));

    // Prefill 3 tokens with an empty cache, then one token per step.
    let past: Record<string, ort.Tensor> = {};
    for (let i = 0; i < cfg.n_layer; i++) {
      past[`past_key_${i}`] = new ort.Tensor('float32', new Float32Array(0), [B, cfg.n_head, 0, hd]);
      past[`past_value_${i}`] = new ort.Tensor('float32', new Float32Array(0), [B, cfg.n_head, 0, hd]);
    }
    let worst = 0;
    let compared = 0;
    for (let [from, to] = [0, 3]; to <= T; [from, to] = [to, to + 1]) {
      const out = await dec.run({
        ...paramFeeds(params),
        ...past,
        input_ids: int64(col(ids, from, to), [B, to - from]),
        position_ids: int64(col(pos, from, to), [B, to - from]),
        attention_mask: bool(col(mask, 0, to), [B, to]),
      });
      const logits = out.logits.data as Float32Array; // [B, V]
      for (let b = 0; b < B; b++) {
        if (!mask[b * T + to - 1]) continue; // a padding position predicts nothing
        for (let v = 0; v < V; v++) {
          worst = Math.max(worst, Math.abs(logits[b * V + v] - refLogits[(b * T + to - 1) * V + v]));
          compared++;
        }
      }
      past = {};
      for (let i = 0; i < cfg.n_layer; i++) {
        t.same(out[`present_key_${i}`].dims, [B, cfg.n_head, to, hd]);
        past[`past_key_${i}`] = out[`present_key_${i}`];
        past[`past_value_${i}`] = out[`present_value_${i}`];
      }
    }
    t.equal(compared, (5 + 4) * V, 'every real position of both rows compared');
    t.ok(worst <= 1e-5, `max |decode - full| = ${worst} <= 1e-5`);
    const spread = Math.max(...refLogits) - Math.min(...refLogits);
    t.ok(spread > 1, `logits vary (${spread.toFixed(2)}), so the comparison is not vacuous`);
  },
);

t.test('a left-padded row computes what it computes alone', async (t) => {
  const params = randomParams(4);
  const s = await ort.InferenceSession.create(
    buildForwardGraph(cfg, { logits: true, padding: true }).serialize(),
  );
  const run = (rowIds: number[], rowMask: number[], rowPos: number[], n: number) =>
    s.run({
      ...paramFeeds(params),
      input_ids: int64(rowIds, [1, n]),
      attention_mask: bool(rowMask, [1, n]),
      position_ids: int64(rowPos, [1, n]),
    });
  const padded = (await run(ids.slice(T), mask.slice(T), pos.slice(T), T)).logits.data as Float32Array;
  const alone = (await run(ids.slice(T + 3), [1, 1, 1, 1], [0, 1, 2, 3], 4)).logits.data as Float32Array;
  const V = cfg.vocab_size;
  const diff = Math.max(...Array.from(alone, (v, k) => Math.abs(v - padded[3 * V + k])));
  t.ok(diff <= 1e-5, `max diff ${diff}`);
});

t.test('logprobs are log-softmax(logits) at the next token, with or without the logits output', async (t) => {
  const params = randomParams(5);
  const withLogits = await ort.InferenceSession.create(buildForwardGraph(cfg, { logits: true }).serialize());
  const plain = await ort.InferenceSession.create(buildForwardGraph(cfg, { batch: 2, seq: 7 }).serialize());
  const feeds = { ...paramFeeds(params), input_ids: int64(ids, [B, T]) };
  const a = await withLogits.run(feeds);
  const b = await plain.run(feeds);
  const logits = a.logits.data as Float32Array;
  const V = cfg.vocab_size;
  const lp = b.logprobs.data as Float32Array;
  t.same(b.logprobs.dims, [B, T - 1]);
  let worst = 0;
  for (let r = 0; r < B; r++) {
    for (let s = 0; s < T - 1; s++) {
      const row = logits.subarray((r * T + s) * V, (r * T + s + 1) * V);
      const m = Math.max(...row);
      const lse = m + Math.log(row.reduce((acc, v) => acc + Math.exp(v - m), 0));
      const expected = row[ids[r * T + s + 1]] - lse;
      worst = Math.max(
        worst,
        Math.abs(expected - lp[r * (T - 1) + s]),
        Math.abs(expected - (a.logprobs.data as Float32Array)[r * (T - 1) + s]),
      );
    }
  }
  t.ok(worst <= 1e-5, `max error ${worst}`);
});

/** Plain-TS GPT-2 forward for one row (HF GPT2LMHeadModel semantics), logits [T][V]. */
function referenceLogits(p: Params, row: number[]): number[][] {
  const { n_embd: D, n_head: H, vocab_size: V } = cfg;
  const hd = D / H;
  const w = (n: string) => p.get(n)!;
  const linear = (x: number[][], name: string) => {
    const W = w(`${name}.weight`);
    const b = w(`${name}.bias`);
    const out = b.length;
    return x.map((r) =>
      Array.from({ length: out }, (_, j) => r.reduce((acc, v, i) => acc + v * W[i * out + j], b[j])),
    );
  };
  const ln = (x: number[][], name: string) =>
    x.map((r) => {
      const mean = r.reduce((a, b) => a + b, 0) / r.length;
      const vr = r.reduce((a, b) => a + (b - mean) ** 2, 0) / r.length;
      return r.map(
        (v, i) => ((v - mean) / Math.sqrt(vr + 1e-5)) * w(`${name}.weight`)[i] + w(`${name}.bias`)[i],
      );
    });
  const gelu = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  let x = row.map((id, t) =>
    Array.from({ length: D }, (_, i) => w('wte.weight')[id * D + i] + w('wpe.weight')[t * D + i]),
  );
  for (let l = 0; l < cfg.n_layer; l++) {
    const qkv = linear(ln(x, `h.${l}.ln_1`), `h.${l}.attn.c_attn`);
    const y = x.map(() => new Array<number>(D).fill(0));
    for (let h = 0; h < H; h++) {
      for (let t = 0; t < x.length; t++) {
        const q = (i: number) => qkv[t][h * hd + i];
        const scores = Array.from({ length: t + 1 }, (_, s) => {
          let dot = 0;
          for (let i = 0; i < hd; i++) dot += q(i) * qkv[s][D + h * hd + i];
          return dot / Math.sqrt(hd);
        });
        const m = Math.max(...scores);
        const e = scores.map((v) => Math.exp(v - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let s = 0; s <= t; s++)
          for (let i = 0; i < hd; i++) y[t][h * hd + i] += (e[s] / z) * qkv[s][2 * D + h * hd + i];
      }
    }
    const a = linear(y, `h.${l}.attn.c_proj`);
    x = x.map((r, t) => r.map((v, i) => v + a[t][i]));
    const f = linear(
      linear(ln(x, `h.${l}.ln_2`), `h.${l}.mlp.c_fc`).map((r) => r.map(gelu)),
      `h.${l}.mlp.c_proj`,
    );
    x = x.map((r, t) => r.map((v, i) => v + f[t][i]));
  }
  return ln(x, 'ln_f').map((r) =>
    Array.from({ length: V }, (_, v) => r.reduce((acc, hv, i) => acc + hv * w('wte.weight')[v * D + i], 0)),
  );
}

t.test(
  'forward logits equal a plain-TS GPT-2 reference (HF layout: qkv split, heads, tied head)',
  async (t) => {
    const params = randomParams(6);
    const s = await ort.InferenceSession.create(buildForwardGraph(cfg, { logits: true }).serialize());
    const row = ids.slice(0, T);
    const got = (await s.run({ ...paramFeeds(params), input_ids: int64(row, [1, T]) })).logits
      .data as Float32Array;
    const ref = referenceLogits(params, row).flat();
    const err = Math.max(...ref.map((v, i) => Math.abs(v - got[i])));
    t.ok(err <= 1e-4, `max |graph - reference| = ${err} (float32 graph vs float64 loop)`);
  },
);
