/**
 * Test-only crash points. `AKBE_TEST_KILL_AT=<point>:<step>` makes the process SIGKILL itself the
 * first time it reaches that point of that training step, so the resume tests can kill a run
 * inside labelling, training or publishing deterministically (a timed kill from outside lands
 * wherever the scheduler happens to be). Unset (always, outside tests), every call is a no-op.
 *
 *   labels:<k>   after step k's boundary labels are stored, before its learner.step
 *   train:<k>    after step k's first optimizer update, before its checkpoint is saved
 *   publish:<k>  after step k's checkpoint v(k+1) is on disk, before the object store and KV have it
 *   rollout:<k>  in a rollout worker: after a step-k rollout's rollout.completed is stored, before
 *                its command is acked (the worker's other rollouts in flight die with it)
 *   rollout-start:<k>  in a rollout worker, once its first rollout of step k has stored
 *                rollout.started (the command is taken and unacked: JetStream must redeliver it)
 *
 * `AKBE_TEST_HOLD_AT=<point>:<step>` instead stops there for good (the process stays alive), so a
 * test can break something else (kill the NATS server) while the run is known to be mid-step: on
 * an idle machine a tiny run finishes in about a second, and a kill timed from outside lands in
 * its shutdown instead.
 */
export type KillPoint = 'labels' | 'train' | 'publish' | 'rollout' | 'rollout-start';

export const KILL_AT_ENV = 'AKBE_TEST_KILL_AT';
export const HOLD_AT_ENV = 'AKBE_TEST_HOLD_AT';

export function killPointArmed(point: KillPoint, step: number): boolean {
  return process.env[KILL_AT_ENV] === `${point}:${step}`;
}

export function killPoint(point: KillPoint, step: number): void {
  if (!killPointArmed(point, step)) return;
  process.stderr.write(`${KILL_AT_ENV}: killing this process at ${point}:${step}\n`);
  process.kill(process.pid, 'SIGKILL');
}

/** Never settles when `AKBE_TEST_HOLD_AT` names this point, after saying so on stderr. */
export function holdPoint(point: KillPoint, step: number): Promise<void> {
  if (process.env[HOLD_AT_ENV] !== `${point}:${step}`) return Promise.resolve();
  process.stderr.write(`${HOLD_AT_ENV}: holding at ${point}:${step}\n`);
  return new Promise(() => {});
}

export const FAULT_AT_ENV = 'AKBE_TEST_FAULT_AT';
const faultsMade = new Map<string, number>();

/**
 * Test-only faults: `AKBE_TEST_FAULT_AT=upload:<version>:<n>` makes the first n checkpoint
 * uploads of that version (object-store puts, each try counted) throw a TimeoutError, as a busy
 * server's missing ack would; `upload:<version>:always` every one. Unset, a no-op.
 */
export function faultPoint(point: 'upload', version: number): void {
  const m = /^([a-z]+):(\d+):(\d+|always)$/.exec(process.env[FAULT_AT_ENV] ?? '');
  if (!m || m[1] !== point || Number(m[2]) !== version) return;
  const key = `${point}:${version}`;
  const made = faultsMade.get(key) ?? 0;
  if (m[3] !== 'always' && made >= Number(m[3])) return;
  faultsMade.set(key, made + 1);
  throw Object.assign(new Error(`timeout (${FAULT_AT_ENV}=${m[0]})`), { name: 'TimeoutError' });
}
