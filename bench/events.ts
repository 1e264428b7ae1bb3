/**
 * Event backbone benchmark (issue 2, item 8). Starts its own nats-server (JetStream, file store in
 * a temp dir, free port) and measures, in one process on the same events:
 *   - appends/s awaiting each append vs windowed appends (acceptance: windowed >= 3x awaited);
 *   - replay events/s (ordered consumer, decode + validate);
 *   - msgpack (the event codec) vs JSON encode/decode ops/s on rollout.completed events.
 * Prints the median of REPEATS runs per figure.
 *
 *   npm run build && node dist/bench/events.js [--events 5000] [--repeats 5] [--window 256] [--tokens 512]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Packr, Unpackr } from 'msgpackr';
import { connectLocal } from '../src/actors/nats/connection.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { CODEC_OPTIONS, decodeEvent, encodeEvent, toJsonValue } from '../src/events/codec.js';
import { EventStore } from '../src/events/store.js';
import { Rng } from '../src/util/rng.js';
import { syntheticRollout, syntheticRunEvents } from '../test/helpers/synthetic.js';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '5000' },
    repeats: { type: 'string', default: '5' },
    window: { type: 'string', default: '256' },
    tokens: { type: 'string', default: '512' },
  },
});
const N = Number(values.events);
const REPEATS = Number(values.repeats);
const WINDOW = Number(values.window);
const TOKENS = Number(values.tokens);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x: number) => Math.round(x).toLocaleString('en-US');

/** N events of a synthetic run (all types; 256-token rollouts), for one run id. */
function runOf(runId: string): AkbeEvent[] {
  // 17 events per question with 2+2 rollouts; enough questions for N events.
  const questions = Math.ceil(N / 17);
  const steps = Math.max(1, Math.ceil(questions / 32));
  return syntheticRunEvents({
    runId,
    steps,
    questionsPerStep: Math.ceil(questions / steps),
    responseTokens: 256,
  }).slice(0, N);
}

async function timeIt(fn: () => Promise<unknown> | unknown): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

function opsPerSecond(fn: () => unknown, minMs = 300): number {
  for (let i = 0; i < 50; i++) fn(); // warm up the JIT
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < minMs) {
    for (let i = 0; i < 50; i++) fn();
    n += 50;
    t = performance.now();
  }
  return (n * 1000) / (t - t0);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-bench-'));
  const server = await startNatsServer({ storeDir: dir });
  const nc = await connectLocal(server);
  const store = await EventStore.open(nc);
  const sample = runOf('size-probe');
  const bytes = sample.reduce((a, e) => a + encodeEvent(e).length, 0);
  console.log(`nats-server ${nc.info?.version} at ${server.url}, file store in ${dir}`);
  console.log(
    `${N} events per run (all 12 types, 256-token rollouts), mean ${Math.round(bytes / sample.length)} B/event; window ${WINDOW}; median of ${REPEATS}`,
  );

  const awaited: number[] = [];
  const windowed: number[] = [];
  const replay: number[] = [];
  for (let r = 0; r < REPEATS; r++) {
    const a = runOf(`bench-awaited-${r}`);
    awaited.push(
      N /
        (await timeIt(async () => {
          for (const e of a) await store.append(e);
        })),
    );
    const w = runOf(`bench-windowed-${r}`);
    windowed.push(N / (await timeIt(() => store.appendMany(w, { window: WINDOW }))));
    let seen = 0;
    replay.push(
      N /
        (await timeIt(async () => {
          for await (const _ of store.replay(`bench-windowed-${r}`)) seen++;
        })),
    );
    if (seen !== N) throw new Error(`replay returned ${seen} of ${N} events`);
  }

  // Codec: one realistic rollout.completed (TOKENS response tokens, TOKENS/4 prompt tokens).
  const rollout = syntheticRollout('bench', new Rng(1), {
    step: 3,
    questionId: 'q17',
    path: 'with-tool',
    index: 5,
    responseTokens: TOKENS,
  });
  const packr = new Packr(CODEC_OPTIONS);
  const unpackr = new Unpackr(CODEC_OPTIONS);
  const mp = packr.pack(rollout);
  const js = Buffer.from(JSON.stringify(toJsonValue(rollout)));
  const fromJson = (buf: Buffer) => {
    // JSON loses typed arrays: rebuild them, as a JSON codec would have to.
    const e = JSON.parse(buf.toString());
    const d = e.data;
    d.promptTokenIds = Int32Array.from(d.promptTokenIds);
    d.responseTokenIds = Int32Array.from(d.responseTokenIds);
    d.oldLogprobs = Float32Array.from(d.oldLogprobs);
    d.lossMask = Uint8Array.from(d.lossMask);
    return e;
  };
  const codec: Record<string, number[]> = { mpEnc: [], mpDec: [], jsEnc: [], jsDec: [], full: [] };
  for (let r = 0; r < REPEATS; r++) {
    codec.mpEnc.push(opsPerSecond(() => packr.pack(rollout)));
    codec.mpDec.push(opsPerSecond(() => unpackr.unpack(mp)));
    codec.jsEnc.push(opsPerSecond(() => Buffer.from(JSON.stringify(toJsonValue(rollout)))));
    codec.jsDec.push(opsPerSecond(() => fromJson(js)));
    codec.full.push(opsPerSecond(() => decodeEvent(mp)));
  }

  const aw = median(awaited);
  const wi = median(windowed);
  const ratio = wi / aw;
  console.log('');
  console.log(
    `appends, awaited one by one   ${fmt(aw).padStart(9)} events/s   (runs: ${awaited.map(fmt).join(', ')})`,
  );
  console.log(
    `appends, windowed (${WINDOW})      ${fmt(wi).padStart(9)} events/s   (runs: ${windowed.map(fmt).join(', ')})`,
  );
  console.log(
    `replay (decode + validate)    ${fmt(median(replay)).padStart(9)} events/s   (runs: ${replay.map(fmt).join(', ')})`,
  );
  console.log(
    `windowed / awaited            ${ratio.toFixed(2).padStart(9)}x          acceptance >= 3x: ${ratio >= 3 ? 'PASS' : 'FAIL'}`,
  );
  console.log('');
  console.log(
    `codec on rollout.completed with ${TOKENS} response tokens: msgpack ${mp.length} B, JSON ${js.length} B (${(js.length / mp.length).toFixed(2)}x)`,
  );
  const row = (name: string, m: number, j: number) =>
    console.log(
      `${name.padEnd(8)} msgpack ${fmt(m).padStart(8)} ops/s   JSON ${fmt(j).padStart(8)} ops/s   msgpack/JSON ${(m / j).toFixed(2)}x`,
    );
  row('encode', median(codec.mpEnc), median(codec.jsEnc));
  row('decode', median(codec.mpDec), median(codec.jsDec));
  console.log(`decodeEvent (msgpack + upcast + validate) ${fmt(median(codec.full))} ops/s`);

  await store.close();
  await nc.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  if (ratio < 3) process.exitCode = 1;
}

await main();
