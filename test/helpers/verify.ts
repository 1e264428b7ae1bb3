/**
 * `akbe replay --run ID --verify-training` in-process, asserted to re-derive every published
 * version v1..vSTEPS bit for bit (the shared acceptance check of the runs that verify).
 */
import type { Test } from 'tap';
import { runCli } from './cli.js';

export async function assertVerifies(
  t: Test,
  o: { runId: string; natsUrl: string; home: string; steps: number },
): Promise<void> {
  const r = await runCli(
    'replay',
    '--run',
    o.runId,
    '--verify-training',
    '--nats',
    o.natsUrl,
    '--home',
    o.home,
  );
  t.equal(r.code, 0, r.out + r.err);
  const n = o.steps;
  t.match(
    r.out,
    new RegExp(
      `verified training: ${n} step${n === 1 ? '' : 's'} re-derived from v0; every published checkpoint \\(v1\\.\\.v${n}\\) matches bit for bit`,
    ),
  );
}
