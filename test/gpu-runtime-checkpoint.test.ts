import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { CheckpointError, loadCheckpoint, saveCheckpoint } from '../src/gpu/checkpoint.js';
import { type GPTConfig, gpt2ParamShapes, initParams, type Params } from '../src/gpu/config.js';
import { decodeSafetensors, encodeSafetensors, SafetensorsFormatError } from '../src/gpu/safetensors.js';

const cfg: GPTConfig = {
  vocab_size: 11,
  n_embd: 4,
  n_layer: 1,
  n_head: 2,
  n_positions: 6,
  layer_norm_epsilon: 1e-5,
  activation_function: 'gelu_new',
};

function tmp(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-ckpt-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function sameParams(t: Test, a: Params, b: Params) {
  t.same([...a.keys()].sort(), [...b.keys()].sort());
  for (const [k, v] of a) t.same(Array.from(b.get(k)!), Array.from(v), k);
}

/**
 * Builds model.safetensors bytes the way Python's `safetensors.torch.save_file` lays them out
 * (compact serde JSON, space padding to 8 bytes, tensors sorted by name), independently of our
 * writer, including the tied lm_head.weight that some `save_pretrained` versions keep.
 */
function pytorchStyleBytes(params: Params, withLmHead: boolean): Uint8Array {
  const names = [...params.keys()].map((n) => `transformer.${n}`);
  if (withLmHead) names.push('lm_head.weight');
  names.sort();
  const shapes = new Map(gpt2ParamShapes(cfg).map((p) => [`transformer.${p.name}`, p.shape]));
  shapes.set('lm_head.weight', [cfg.vocab_size, cfg.n_embd]);
  const dataOf = (n: string) =>
    n === 'lm_head.weight' ? params.get('wte.weight')! : params.get(n.slice('transformer.'.length))!;
  let header = '{"__metadata__":{"format":"pt"}';
  let off = 0;
  for (const n of names) {
    const bytes = dataOf(n).length * 4;
    header += `,"${n}":{"dtype":"F32","shape":[${shapes.get(n)!.join(',')}],"data_offsets":[${off},${off + bytes}]}`;
    off += bytes;
  }
  header += '}';
  while (header.length % 8 !== 0) header += ' ';
  const out = new Uint8Array(8 + header.length + off);
  const view = new DataView(out.buffer);
  view.setUint32(0, header.length, true); // low word of the uint64 LE length
  view.setUint32(4, 0, true);
  for (let i = 0; i < header.length; i++) out[8 + i] = header.charCodeAt(i);
  let at = 8 + header.length;
  for (const n of names) {
    for (const x of dataOf(n)) {
      view.setFloat32(at, x, true);
      at += 4;
    }
  }
  return out;
}

t.test('safetensors: bytes round-trip with metadata, aligned padded header, mixed dtypes', async (t) => {
  const a = new Float32Array([1.5, -2, 3.25]);
  const b = new BigInt64Array([7n, -1n]);
  const bytes = encodeSafetensors(
    [
      ['a', { shape: [3], data: a }],
      ['b', { shape: [1, 2], data: b }],
    ],
    { format: 'pt', note: 'x' },
  );
  const headerLen = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  t.equal(headerLen % 8, 0, 'header padded to 8 bytes');
  const back = decodeSafetensors(bytes, 'mem');
  t.same(back.metadata, { format: 'pt', note: 'x' });
  t.same(Array.from(back.tensors.get('a')!.data as Float32Array), [1.5, -2, 3.25]);
  t.same(back.tensors.get('b')!.shape, [1, 2]);
  t.same(Array.from(back.tensors.get('b')!.data as BigInt64Array), [7n, -1n]);
  // The 8-byte tensor is laid out first, so both start aligned to their element size.
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLen)));
  t.same(header.b.data_offsets, [0, 16]);
  t.same(header.a.data_offsets, [16, 28]);
});

t.test('checkpoint: save then load gives the same config, params and optimizer state', async (t) => {
  const dir = tmp(t);
  const params = initParams(cfg, 1);
  const m = initParams(cfg, 2);
  const v = initParams(cfg, 3);
  await saveCheckpoint(dir, { config: cfg, params, optimizer: { step: 17, m, v } });
  t.same(
    readdirSync(dir).sort(),
    ['config.json', 'model.safetensors', 'optimizer.safetensors'],
    'no temp files left',
  );
  const hf = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  t.same(hf.architectures, ['GPT2LMHeadModel']);
  t.equal(hf.model_type, 'gpt2');
  t.equal(hf.tie_word_embeddings, true);
  const file = decodeSafetensors(readFileSync(join(dir, 'model.safetensors')), 'model');
  t.ok(file.tensors.has('transformer.h.0.attn.c_attn.weight'), 'GPT2LMHeadModel names');
  t.notOk(file.tensors.has('lm_head.weight'), 'tied lm_head omitted');
  t.same(file.tensors.get('transformer.h.0.mlp.c_fc.weight')!.shape, [4, 16], 'Conv1D layout [in, out]');
  t.equal(file.metadata.format, 'pt');

  const back = await loadCheckpoint(dir);
  t.same(back.config, cfg);
  sameParams(t, params, back.params);
  t.equal(back.optimizer!.step, 17);
  sameParams(t, m, back.optimizer!.m);
  sameParams(t, v, back.optimizer!.v);
});

t.test(
  'checkpoint: a file laid out by PyTorch (prefix, tied lm_head) loads; so does one without prefix',
  async (t) => {
    const dir = tmp(t);
    const params = initParams(cfg, 5);
    await saveCheckpoint(dir, { config: cfg, params });
    writeFileSync(join(dir, 'model.safetensors'), pytorchStyleBytes(params, true));
    const back = await loadCheckpoint(dir);
    sameParams(t, params, back.params);
    t.equal(back.optimizer, undefined, 'optimizer.safetensors is optional');

    const plain = encodeSafetensors(
      [...params].map(([n, d]) => [
        n,
        { shape: gpt2ParamShapes(cfg).find((p) => p.name === n)!.shape, data: d },
      ]),
    );
    writeFileSync(join(dir, 'model.safetensors'), plain);
    sameParams(t, params, (await loadCheckpoint(dir)).params);
  },
);

t.test('checkpoint: broken files give one-line errors naming the file and the problem', async (t) => {
  const dir = tmp(t);
  const params = initParams(cfg, 6);
  await saveCheckpoint(dir, { config: cfg, params });
  const model = join(dir, 'model.safetensors');
  const good = readFileSync(model);
  const expectError = async (re: RegExp, name = 'CheckpointError') => {
    const e = await loadCheckpoint(dir).then(
      () => undefined,
      (e: Error) => e,
    );
    t.ok(e instanceof CheckpointError, `${re} is a CheckpointError`);
    t.equal(e?.name, name);
    t.match(e?.message, re);
    t.equal(e?.message.split('\n').length, 1, 'one line');
  };

  const wrongShape = new Map(params);
  wrongShape.set('wpe.weight', new Float32Array(5 * 4));
  const shapes = gpt2ParamShapes(cfg).map((p) => (p.name === 'wpe.weight' ? { ...p, shape: [5, 4] } : p));
  writeFileSync(
    model,
    encodeSafetensors(
      shapes.map((p) => [`transformer.${p.name}`, { shape: p.shape, data: wrongShape.get(p.name)! }]),
    ),
  );
  await expectError(
    /model\.safetensors: wrong shape for key transformer\.wpe\.weight: \[5, 4\], config\.json says \[6, 4\]/,
  );

  writeFileSync(
    model,
    encodeSafetensors(
      gpt2ParamShapes(cfg)
        .filter((p) => p.name !== 'ln_f.bias')
        .map((p) => [`transformer.${p.name}`, { shape: p.shape, data: params.get(p.name)! }]),
    ),
  );
  await expectError(/model\.safetensors: missing key transformer\.ln_f\.bias/);

  writeFileSync(
    model,
    encodeSafetensors(
      gpt2ParamShapes(cfg).map((p) => [
        `transformer.${p.name}`,
        { shape: p.shape, data: Int32Array.from(params.get(p.name)!) },
      ]),
    ),
  );
  await expectError(/dtype I32; parameters must be F32, BF16, F16 or F64/);

  writeFileSync(model, good.subarray(0, good.length - 3));
  await expectError(/model\.safetensors: .*truncated|bytes after/);

  const badJson = Buffer.from(good);
  badJson[8] = 0x21; // '!' where '{' was
  writeFileSync(model, badJson);
  await expectError(/model\.safetensors: header is not valid JSON/);

  rmSync(model);
  await expectError(/model\.safetensors: missing/);

  writeFileSync(model, good);
  writeFileSync(join(dir, 'config.json'), '{"n_embd": 4,');
  await expectError(/config\.json: bad JSON/);
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({ vocab_size: 11, n_embd: 4, n_layer: 1, n_positions: 6 }),
  );
  await expectError(/config\.json: .*n_head/);
});

t.test('safetensors: overlapping ranges and wrong byte counts are rejected', async (t) => {
  const mk = (header: object, dataBytes: number) => {
    let h = JSON.stringify(header);
    while (h.length % 8) h += ' ';
    const out = new Uint8Array(8 + h.length + dataBytes);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(new TextEncoder().encode(h), 8);
    return out;
  };
  t.throws(
    () =>
      decodeSafetensors(
        mk(
          {
            a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] },
            b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] },
          },
          8,
        ),
        'f',
      ),
    SafetensorsFormatError,
  );
  t.throws(
    () => decodeSafetensors(mk({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8), 'f'),
    /needs 12/,
  );
  t.throws(
    () => decodeSafetensors(mk({ a: { dtype: 'F8_E4M3', shape: [8], data_offsets: [0, 8] } }, 8), 'f'),
    /dtype "F8_E4M3"/,
  );
  t.throws(() => decodeSafetensors(new Uint8Array(4), 'f'), /too short/);
});
