/**
 * Rollouts on an external inference engine: the tiny world's policy is served by akbe's own
 * OpenAI-compatible server (as vLLM/SGLang would serve it), the run's policy role answers
 * svc.generate through it token-in/token-out, and each version the trainer publishes is pushed
 * to it from disk (POST /update_weights_from_disk). The run is started by `akbe train --engine URL
 * --engine-key-file PATH` and audits clean; the flags' usage errors come before any connection.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { auditRunLog } from '../src/audit/audit.js';
import { foldRunLog } from '../src/audit/run-log.js';
import { main } from '../src/cli/main.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { PolicyHost } from '../src/gpu/policy-host.js';
import { serveCheckpoint } from '../src/serve/policy-server.js';
import { withNats } from './helpers/nats.js';
import { maxScoreDiff } from './helpers/score.js';
import { TINY_TRAIN, tinyRunFixture } from './helpers/tiny-run.js';

delete process.env.NATS_URL;

t.test('a run whose rollouts decode on an external engine, with weight sync from disk', async (t) => {
  const fx = await tinyRunFixture();
  const nats = await withNats(t);
  const store = await EventStore.open(nats.nc);
  const home = mkdtempSync(join(tmpdir(), 'akbe-engine-train-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const runDir = join(home, 'runs', 'engine');
  const loaded: string[] = [];
  const engine = await serveCheckpoint({
    checkpoint: fx.policyDir,
    port: 0,
    apiKey: 'secret',
    allowWeightUpdates: true,
    threads: 1,
    log: (line) => {
      if (line.includes('loaded weights')) loaded.push(line);
    },
  });
  t.teardown(() => engine.close());

  // Through `akbe train --engine` as a user starts it (the policy role of this process forwards
  // svc.generate to the engine; the trainer's embedded policy publishes the versions it loads).
  const config = join(home, 'engine.json');
  writeFileSync(
    config,
    JSON.stringify({ ...TINY_TRAIN, world: fx.worldDir, policy: fx.policyDir, topK: 3, evalQuestions: 0 }),
  );
  const keyFile = join(home, 'engine.key');
  writeFileSync(keyFile, 'secret\n', { mode: 0o600 });
  let err = '';
  const errStream = new PassThrough().on('data', (c) => (err += c));
  const code = await main(
    [
      'train',
      '--config',
      config,
      '--run-id',
      'engine',
      '--nats',
      nats.server.url,
      '--home',
      home,
      '--concurrency',
      '8',
      '--threads',
      '1',
      '--engine',
      `${engine.server.url}/v1`,
      '--engine-key-file',
      keyFile,
    ],
    new PassThrough(),
    errStream,
  );
  t.equal(code, 0, err.slice(-2000));
  const events: AkbeEvent[] = [];
  for await (const { event } of store.replay('engine')) events.push(event);
  const completed = events.filter((e) => e.type === 'rollout.completed');
  t.equal(completed.length, 16, '2 steps x 2 questions x 4 rollouts');
  // The default config asks for batch-invariant decoding; the engine cannot give it, the log says.
  const started = events.find((e) => e.type === 'run.started');
  if (started?.type !== 'run.started') throw new Error('no run.started');
  t.equal(started.data.config.batchInvariantDecode, true, 'the default setting, not refused');
  t.equal(started.data.config.rolloutDecoder, 'external', 'run.started: an external engine decoded');
  const generated = completed.reduce(
    (n, e) => n + (e.type === 'rollout.completed' ? e.data.lossMask.reduce((a, m) => a + m, 0) : 0),
    0,
  );
  t.equal(engine.server.stats.completionTokens, generated, 'every generated token came from the engine');
  t.equal(loaded.length, 1, 'the engine loaded v1 for step 1');
  t.match(loaded[0], /checkpoints.*v1|v1/);

  // Step 1's rollouts are v1's: their recorded logprobs are the published v1 checkpoint's.
  const step1 = completed.find((e) => e.type === 'rollout.completed' && e.meta.step === 1);
  if (step1?.type !== 'rollout.completed') throw new Error('no step-1 rollout');
  const r = step1.data;
  t.equal(step1.meta.policyVersion, 1);
  const v1 = events.find((e) => e.type === 'policy.published' && e.data.version === 1);
  if (v1?.type !== 'policy.published') throw new Error('no policy.published v1');
  const host = await PolicyHost.start({ checkpoint: join(runDir, 'checkpoints', 'v1') });
  t.teardown(() => host.close());
  const diff = await maxScoreDiff(host, r.promptTokenIds, r.responseTokenIds, r.oldLogprobs, r.lossMask);
  t.ok(diff < 1e-4, `recorded logprobs are v1's (max |diff| ${diff.toExponential(1)})`);

  const audit = auditRunLog(foldRunLog(events));
  t.same(audit.mismatches, [], JSON.stringify(audit.mismatches.slice(0, 5)));
  t.equal(audit.checked.steps, 2);
});

t.test('akbe train --engine: usage errors before any connection (exit 2)', async (t) => {
  const usage = async (...args: string[]) => {
    let err = '';
    const e = new PassThrough().on('data', (c) => (err += c));
    const code = await main(['train', '--config', 'x.json', ...args], new PassThrough(), e);
    return { code, err };
  };
  const noWorkers = await usage('--engine', 'http://127.0.0.1:1/v1', '--no-workers');
  t.equal(noWorkers.code, 2);
  t.match(noWorkers.err, /--engine answers svc\.generate .*akbe worker --role policy/);
  const notUrl = await usage('--engine', '127.0.0.1:8000');
  t.equal(notUrl.code, 2);
  t.match(notUrl.err, /--engine must be an http\(s\) URL, got '127\.0\.0\.1:8000'/);
  const lone = await usage('--engine-key', 'k');
  t.equal(lone.code, 2);
  t.match(lone.err, /--engine-key needs --engine URL/);
  // A key on the command line is in `ps` for every local user: refused, with the way out.
  const inArgs = await usage('--engine', 'http://127.0.0.1:1/v1', '--engine-key', 'k');
  t.equal(inArgs.code, 2);
  t.match(inArgs.err, /--engine-key puts the key in `ps` for every user: use --engine-key-file PATH/);
  const dir = mkdtempSync(join(tmpdir(), 'akbe-engine-key-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const readable = join(dir, 'key');
  writeFileSync(readable, 'k\n');
  chmodSync(readable, 0o644); // whatever the umask: the mode under test
  const open = await usage('--engine', 'http://127.0.0.1:1/v1', '--engine-key-file', readable);
  t.equal(open.code, 2);
  t.match(open.err, /--engine-key-file: .*has mode 0644: others may read it; chmod 600/);
});
