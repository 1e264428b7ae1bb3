/**
 * Publishing a policy version to the object store (issue 13: it sat on every step's critical
 * path). The baseline is how CheckpointStore.publish uploaded before session 6, run in the same
 * process on the same server: the files one after another, 128 KiB chunks (the client's default),
 * hashed by the client's pure-JS sha256. Now: CheckpointStore.publish itself (files side by side,
 * chunks as large as the server takes, node:crypto's sha256). Both upload the same checkpoint
 * (config, weights, AdamW state), interleaved, `--runs` times; printed: medians and the ratio.
 * "Now" is the whole of publish (the tokenizer files copied, the current version put in KV), so
 * the ratio errs against it.
 *
 *   npm run build && node dist/bench/checkpoint-publish.js [--runs 30] [--policy assets/base]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Objm, setSha256Backend } from '@nats-io/obj';
import { CheckpointStore } from '../src/actors/checkpoints/checkpoints.js';
import { connectLocal } from '../src/actors/nats/connection.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string', default: '30' },
    policy: { type: 'string', default: 'assets/base' },
  },
});
const runs = Number(flags.runs);
const home = mkdtempSync(join(tmpdir(), 'akbe-bench-publish-'));
const server = await startNatsServer({ storeDir: join(home, 'nats') });
const nc = await connectLocal(server);
try {
  const store = await CheckpointStore.open(nc, 'bench', join(home, 'ck'));
  await store.importBase(resolve(flags.policy));
  // An AdamW state as large as two copies of the weights (what a trained version carries).
  const weights = readFileSync(join(store.versionDir(0), 'model.safetensors'));
  const files = {
    'config.json': readFileSync(join(store.versionDir(0), 'config.json')),
    'model.safetensors': weights,
  };
  const optimizer = Buffer.concat([weights, weights]);
  const obj = await new Objm(nc).create('bench_baseline');
  const before = async (i: number) => {
    setSha256Backend('js');
    const t0 = performance.now();
    for (const [name, bytes] of [...Object.entries(files), ['optimizer.safetensors', optimizer] as const])
      await obj.putBlob({ name: `v${i}/${name}` }, new Uint8Array(bytes));
    return performance.now() - t0;
  };
  const now = async (i: number) => {
    setSha256Backend('native');
    const dir = store.versionDir(i);
    await cp(store.versionDir(0), dir, { recursive: true });
    writeFileSync(join(dir, 'optimizer.safetensors'), optimizer);
    const t0 = performance.now();
    await store.publish(i);
    return performance.now() - t0;
  };
  const mb = (weights.byteLength * 3) / 1e6;
  console.log(
    `bench/checkpoint-publish: ${mb.toFixed(1)} MB a version (weights + AdamW), ${runs} runs, load ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
  await before(0);
  await now(1);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < runs; i++) {
    a.push(await before(i + 1));
    b.push(await now(i + 2));
  }
  const [ma, mb2] = [median(a), median(b)];
  console.log(`before (sequential, 128 KiB chunks, JS sha256): ${ma.toFixed(1)} ms median`);
  console.log(
    `now (CheckpointStore.publish): ${mb2.toFixed(1)} ms median (x${(ma / mb2).toFixed(2)} faster)`,
  );
} finally {
  await nc.close();
  await server.stop();
  rmSync(home, { recursive: true, force: true });
}
