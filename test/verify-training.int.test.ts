/**
 * `akbe replay --verify-training` against real runs (a real nats-server, 2 steps each): a run whose
 * trainer was fed one other token (the base policy, at the first step whose batch moves the
 * weights), a run whose trainer published a changed config.json at step 1, and a clean run whose
 * stored v2 is replaced after the fact. Each is caught at its step, after the steps before it
 * verified; what the cheap audit (without re-training) sees of each is asserted beside it. The
 * clean run also verifies from an export with `--base`. The synchronous run of audit-train.int,
 * and the asynchronous, DPO-AKBE and resumed runs verify in their own files.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import type { TrainCall } from '../src/actors/services/trainer/protocol.js';
import { TrainerService } from '../src/actors/services/trainer/trainer-service.js';
import { readVerifyRecord, verifyRecordPath, writeVerifyRecord } from '../src/audit/verify-record.js';
import { EventStore } from '../src/events/store.js';
import { PolicyHost } from '../src/gpu/policy-host.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { baseRunFixture, tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

delete process.env.NATS_URL;
process.env.CI = 'true';

const fx = await tinyRunFixture();
const base = await baseRunFixture();
const nats = await withNats(t);
const store = await EventStore.open(nats.nc);
const home = mkdtempSync(join(tmpdir(), 'akbe-verify-training-'));
t.teardown(() => rmSync(home, { recursive: true, force: true }));

/**
 * A 2-step tiny run under `<home>/runs/<runId>`, where the CLI looks for its checkpoints. The tiny
 * policy labels every question both-wrong (no advantage, no target), so its weights move by weight
 * decay alone whatever the tokens: a run whose tokens must matter takes the base policy (`fixture`).
 */
async function train(runId: string, fixture = fx) {
  await runTraining({
    nc: nats.nc,
    js: jetstream(nats.nc),
    store,
    runId,
    spec: tinySpec(fixture, fixture === fx ? {} : { batchQuestions: 4, gWithTool: 4 }),
    runDir: join(home, 'runs', runId),
    concurrency: 8,
    threads: 1,
  });
}

/** Replaces `target` on `proto` for the length of `body` (restored even when it throws). */
async function patched<T extends object, K extends keyof T>(
  proto: T,
  key: K,
  wrap: (original: T[K]) => T[K],
  body: () => Promise<void>,
) {
  const original = proto[key];
  proto[key] = wrap(original);
  try {
    await body();
  } finally {
    proto[key] = original;
  }
}

const replay = (runId: string, ...more: string[]) =>
  runCli('replay', '--run', runId, '--nats', nats.server.url, '--home', home, ...more);

t.test('a trainer fed one other token: caught at that step by both', async (t) => {
  type Train = (req: TrainCall) => Promise<unknown>;
  let changed: { step: number } | undefined;
  const proto = TrainerService.prototype as unknown as { train: Train };
  await patched(
    proto,
    'train',
    (original) =>
      function (this: TrainerService, req: TrainCall) {
        // The first step with a row that moves the weights (an advantage or an L_AKBE weight):
        // one token of that row's first trained (loss-mask) position, as received from the wire.
        const b = req.batch;
        const r = [...b.advantages.keys()].find((i) => b.advantages[i] !== 0 || b.akbeWeight[i] > 0);
        if (!changed && r !== undefined) {
          const mask = b.lossMask.subarray(r * (b.T - 1), (r + 1) * (b.T - 1));
          const at = r * b.T + mask.indexOf(1) + 1;
          b.inputIds[at] = (b.inputIds[at] + 1) % 50;
          changed = { step: req.step };
        }
        return original.call(this, req);
      },
    () => train('one-token', base),
  );
  if (!changed) throw new Error('no step of the run had a row that moves the weights');
  const k = changed.step;
  const cheap = await replay('one-token');
  t.equal(cheap.code, 1, 'the cheap audit fails');
  const digestMismatches = cheap.out.match(/learner\.step step \d+: requestSha256:/g) ?? [];
  t.same(digestMismatches, [`learner.step step ${k}: requestSha256:`], `only at step ${k}`);
  const r = await replay('one-token', '--verify-training');
  t.equal(r.code, 1);
  t.match(
    r.out,
    new RegExp(
      `TRAINING MISMATCH step ${k} \\(v${k + 1}\\), after ${k} step${k === 1 ? '' : 's'} verified: model\\.safetensors has sha256`,
    ),
  );
  t.match(r.out, /largest parameter difference \S+\[\d+\]: re-derived -?[\d.e-]+, published/);
  // The verdict is kept for the dashboard's audit panel.
  const kept = await readVerifyRecord(join(home, 'runs'), 'one-token');
  t.match(kept, { runId: 'one-token', result: { ok: false, step: k, version: k + 1, verified: k } });
});

t.test('a kept verdict is read back only when it is one, for a run id that is one', async (t) => {
  const runs = join(home, 'records');
  const result = { ok: true as const, steps: 2, versions: [1, 2] };
  await writeVerifyRecord(runs, { runId: 'r1', at: 'now', events: 10, result });
  t.same(await readVerifyRecord(runs, 'r1'), { runId: 'r1', at: 'now', events: 10, result });
  t.equal(await readVerifyRecord(runs, '../records/r1'), null, 'no path outside the runs directory');
  t.equal(verifyRecordPath(runs, '..'), null);
  writeFileSync(
    join(runs, 'r1', 'verify-training.json'),
    '{"runId":"r1","at":"now","events":1,"result":{"ok":false}}',
  );
  t.equal(await readVerifyRecord(runs, 'r1'), null, 'a damaged record is no record');
  await writeVerifyRecord(runs, { runId: 'r2', at: 'now', events: 1, result });
  t.equal(await readVerifyRecord(runs, 'r3'), null, 'none kept');
  await t.rejects(writeVerifyRecord(runs, { runId: '../x', at: 'now', events: 1, result }), RangeError);
});

t.test('a trainer that published a changed config.json at step 1: only verification sees it', async (t) => {
  type Save = (dir: string) => Promise<void>;
  const proto = PolicyHost.prototype as unknown as { saveCheckpoint: Save };
  await patched(
    proto,
    'saveCheckpoint',
    (original) =>
      async function (this: PolicyHost, dir: string) {
        await original.call(this, dir);
        if (!dir.endsWith('v2')) return;
        const file = join(dir, 'config.json');
        const config = JSON.parse(readFileSync(file, 'utf8'));
        writeFileSync(file, JSON.stringify({ ...config, layer_norm_epsilon: 1e-3 }));
      },
    () => train('config-swap'),
  );
  const cheap = await replay('config-swap');
  // The manifest records the changed file: nothing the log holds contradicts it.
  t.equal(cheap.code, 0, 'the cheap audit cannot see it');
  const r = await replay('config-swap', '--verify-training');
  t.equal(r.code, 1);
  t.match(
    r.out,
    /TRAINING MISMATCH step 1 \(v2\), after 1 step verified: config\.json has sha256 \w+…, the manifest of v2 records/,
  );
  t.notMatch(r.out, /model\.safetensors has sha256/, 'the weights themselves trained as logged');
});

t.test('a clean run verifies; its stored v2 replaced afterwards is caught by both', async (t) => {
  await train('clean');
  const ok = await replay('clean', '--verify-training', '--json');
  t.equal(ok.code, 0, ok.out + ok.err);
  const report = JSON.parse(ok.out);
  t.same(report.verifyTraining, { ok: true, steps: 2, versions: [1, 2] });
  t.notOk('requests' in report, 'the rebuilt requests are not printed');
  // An export and the base directory: no NATS needed, v0 checked against run.started.
  const exportFile = join(home, 'clean.jsonl');
  const exported = await runCli(
    'events',
    'export',
    '--run',
    'clean',
    '--out',
    exportFile,
    '--nats',
    nats.server.url,
  );
  t.equal(exported.code, 0, exported.err);
  const elsewhere = join(home, 'elsewhere');
  const fromFile = await runCli(
    'replay',
    '--file',
    exportFile,
    '--verify-training',
    '--base',
    fx.policyDir,
    '--home',
    elsewhere,
  );
  t.equal(fromFile.code, 0, fromFile.out + fromFile.err);
  t.match(fromFile.out, /verified training: 2 steps re-derived from v0/);
  // `elsewhere` holds no run `clean`: its verdict is not kept there (it would name nothing).
  t.match(fromFile.err, /the verdict was not kept: \S+ holds no run clean/);
  t.notOk(existsSync(join(elsewhere, 'runs', 'clean')), 'nothing written under a home without the run');
  // The same run as a v1 log (learner.step and policy.published without digests or manifests,
  // as written before session 7): verified by the weights' sha256, and said what is unchecked.
  const v1File = join(home, 'clean-v1.jsonl');
  const v1Lines = readFileSync(exportFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((e) => e.type !== 'export.seal')
    .map((e) => {
      if (e.type === 'learner.step') {
        delete e.data.requestSha256;
        e.v = 1;
      }
      if (e.type === 'policy.published') {
        for (const k of ['requestSha256', 'manifest', 'manifestSha256']) delete e.data[k];
        e.v = 1;
      }
      return JSON.stringify(e);
    });
  writeFileSync(v1File, `${v1Lines.join('\n')}\n`);
  const old = await runCli(
    'replay',
    '--file',
    v1File,
    '--unsigned',
    '--verify-training',
    '--base',
    fx.policyDir,
    '--home',
    elsewhere,
  );
  t.equal(old.code, 0, old.out + old.err);
  t.match(old.out, /verified training: 2 steps re-derived from v0/);
  t.match(old.err, /records no train request digests \(learner\.step v1\)/);
  const noBase = await runCli('replay', '--file', exportFile, '--verify-training', '--home', elsewhere);
  t.equal(noBase.code, 2);
  t.match(noBase.err, /--verify-training with --file needs --base DIR: the run's base policy/);
  // Flip one weight of v2 on disk (the bytes after the header are the tensors).
  const file = join(home, 'runs', 'clean', 'checkpoints', 'v2', 'model.safetensors');
  const bytes = readFileSync(file);
  const headerEnd = 8 + Number(bytes.readBigUInt64LE(0));
  const at = headerEnd + 4 * 10;
  bytes.writeFloatLE(bytes.readFloatLE(at) + 0.5, at);
  writeFileSync(file, bytes);
  const cheap = await replay('clean');
  t.equal(cheap.code, 1);
  t.match(
    cheap.out,
    /policy\.published step 1: checkpoint files of v2/,
    'the audit checks the files on disk against the manifest',
  );
  const r = await replay('clean', '--verify-training');
  t.equal(r.code, 1);
  t.match(
    r.out,
    /TRAINING MISMATCH step 1 \(v2\), after 1 step verified: the stored v2 model\.safetensors has sha256/,
  );
  t.match(r.out, /\(\|diff\| 0\.5\)/, 'the largest difference is the planted one');
});

t.test('refusals: --base of another policy, --file without --base, --question', async (t) => {
  const other = await replay('clean', '--verify-training', '--base', fx.worldDir);
  t.equal(other.code, 1);
  t.match(other.err, /no model\.safetensors there/);
  const bad = await runCli(
    'replay',
    '--run',
    'clean',
    '--verify-training',
    '--question',
    'q1',
    '--nats',
    nats.server.url,
  );
  t.equal(bad.code, 2);
  t.match(bad.err, /--verify-training and --question do not go together/);
  const base = await runCli('replay', '--run', 'clean', '--base', fx.policyDir, '--nats', nats.server.url);
  t.equal(base.code, 2);
  t.match(base.err, /--base needs --verify-training/);
});
