/**
 * Issue 11 item 8, the smaller findings, each reproduced and refused with a clear message:
 * `events export` of a run that does not exist exits non-zero (it exited 0 with an empty file);
 * `gWithTool: 1` is refused (GRPO then learns nothing); `lr: .nan` is reported as NaN (it said
 * "got null"). (`stopTokens: 'x'` on svc.generate: test/edge-validators.test.ts; an export cut
 * before run.finished: test/dedupe-prepublish.int.test.ts.)
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { validateTrainConfig } from '../src/rl/config.js';
import { ConfigError } from '../src/rl/errors.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';

t.test('events export of a missing run exits 1 and leaves no file', async (t) => {
  const nats = await withNats(t);
  const dir = mkdtempSync(join(tmpdir(), 'akbe-export-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'none.jsonl');
  const r = await runCli('events', 'export', '--run', 'no-such-run', '--out', out, '--nats', nats.server.url);
  t.equal(r.code, 1);
  t.match(r.err, /run no-such-run has no events on .*: nothing exported/);
  t.notOk(existsSync(out), 'no empty export left behind');
});

t.test('gWithTool 1 and lr NaN are refused with what is wrong', async (t) => {
  t.throws(() => validateTrainConfig({ gWithTool: 1 }), {
    constructor: ConfigError,
    message: /config\.gWithTool must be >= 2: GRPO compares .* got 1/,
  });
  t.throws(() => validateTrainConfig({ lr: Number.NaN }), { message: /config\.lr must be .*, got NaN$/ });
  t.throws(() => validateTrainConfig({ lr: Number.POSITIVE_INFINITY }), { message: /got Infinity$/ });
  t.equal(validateTrainConfig({ gWithTool: 2 }).gWithTool, 2);
});
