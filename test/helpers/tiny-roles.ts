import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { CheckpointStore } from '../../src/actors/checkpoints/checkpoints.js';
import { type Role, type RoleOptions, type RunSpec, startRoles } from '../../src/actors/roles/roles.js';
import type { EventStore } from '../../src/events/store.js';
import type { TinyRun } from './tiny-run.js';

/**
 * `roles` of run `runId` started in this process on `nc` (the orchestrator's connection, as
 * `akbe train` runs them), over a checkpoint store under `dir` holding the tiny base as v0.
 * The caller stops them (`started.stop()`).
 */
export async function startTinyRoles(
  nc: NatsConnection,
  store: EventStore,
  fx: TinyRun,
  dir: string,
  runId: string,
  spec: RunSpec,
  roles: readonly Role[],
  opts: RoleOptions = {},
) {
  const checkpoints = await CheckpointStore.open(nc, runId, join(dir, runId));
  await checkpoints.importBase(fx.policyDir);
  const started = await startRoles(nc, jetstream(nc), store, checkpoints, runId, spec, roles, opts);
  return { checkpoints, started };
}
