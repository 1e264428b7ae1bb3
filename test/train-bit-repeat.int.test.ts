/**
 * A seed repeats a run bit for bit by default (`batchInvariantDecode`, on unless a config turns it
 * off; docs/training.md): the committed base trains one small step twice through a real
 * nats-server, once with 2 rollouts at a time and once with 16, so the policy decodes them in
 * quite different batches. With the default config both runs record the same logprobs and end on
 * the same checkpoint bytes. The plant, tried: the same pair with the setting off ends on
 * checkpoints that differ at float rounding, and every assertion on bits below fails (session 6,
 * then with `batchInvariantDecode: false` in the spec; the unit-level contrast stays in
 * test/gpu-batch-invariant.test.ts).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { EventStore } from '../src/events/store.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, tinySpec } from './helpers/tiny-run.js';

delete process.env.NATS_URL;
process.env.CI = 'true';

const fx = await baseRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-bit-repeat-'));
t.teardown(() => rmSync(home, { recursive: true, force: true }));

/** The final checkpoint's sha256 and every recorded rollout logprob of one run. */
async function train(runId: string, concurrency: number) {
  const runDir = join(home, runId);
  await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fx, {
      steps: 1,
      batchQuestions: 4,
      gWithTool: 4,
      maxResponseTokens: 64,
    }),
    runDir,
    concurrency,
    threads: 1,
  });
  const logprobs = new Map<string, number[]>();
  let decoder: unknown;
  for await (const { event } of store.replay(runId)) {
    if (event.type === 'rollout.completed')
      logprobs.set(event.meta.rolloutId!, Array.from(event.data.oldLogprobs));
    if (event.type === 'run.started') decoder = event.data.config.rolloutDecoder;
  }
  const model = readFileSync(join(runDir, 'checkpoints', 'v1', 'model.safetensors'));
  return { sha: createHash('sha256').update(model).digest('hex'), logprobs, decoder };
}

t.test('the default config: 2 and 16 rollouts at a time give the same bits', async (t) => {
  const a = await train('inv-c2', 2);
  const b = await train('inv-c16', 16);
  t.equal(a.decoder, 'embedded', "run.started: akbe's own decoder rolled out");
  t.equal(a.logprobs.size, 4 * (4 + 2), 'every rollout of the step recorded');
  t.same([...b.logprobs.keys()].sort(), [...a.logprobs.keys()].sort());
  const differing = [...a.logprobs].filter(([id, lp]) => lp.some((x, i) => x !== b.logprobs.get(id)![i]));
  t.same(
    differing.map(([id]) => id),
    [],
    'every rollout logprob equal to the bit',
  );
  t.equal(b.sha, a.sha, 'the same final checkpoint, byte for byte');
});
