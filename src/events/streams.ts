/**
 * The two streams the event store keeps, created on open when missing: AKBE_EVENTS (subjects
 * `akbe.*.evt.>`, file storage, duplicate window) and AKBE_DEAD_LETTERS (one message per subject).
 */
import {
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { EventStoreError } from './errors.js';
import { retryElection } from './retry.js';

export const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60_000;
export const nanos = (ms: number) => ms * 1_000_000;

export async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subjects: string,
  opts: { replicas: number; duplicateWindowMs: number; perSubject?: number },
) {
  try {
    const info = await retryElection(jsm, `stream info ${name}`, () => jsm.streams.info(name));
    if (!info.config.subjects?.includes(subjects)) {
      throw new EventStoreError(
        `stream ${name} exists with subjects ${JSON.stringify(info.config.subjects)}, expected ${subjects}: delete or fix it`,
      );
    }
    return;
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== 10059) {
      if (err instanceof EventStoreError) throw err;
      throw new EventStoreError(
        `cannot read stream ${name}: ${(err as Error).message}`,
        (err as JetStreamApiError).code,
        { cause: err },
      );
    }
  }
  try {
    await retryElection(jsm, `create stream ${name}`, () =>
      jsm.streams.add({
        name,
        subjects: [subjects],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        num_replicas: opts.replicas,
        duplicate_window: nanos(opts.duplicateWindowMs),
        ...(opts.perSubject ? { max_msgs_per_subject: opts.perSubject } : {}),
      }),
    );
  } catch (err) {
    // Another process may have created it between info and add.
    if (err instanceof JetStreamApiError && err.code === 10058) return;
    throw new EventStoreError(
      `cannot create stream ${name}: ${(err as Error).message}`,
      (err as JetStreamApiError).code,
      { cause: err },
    );
  }
}

/**
 * Replicas for newly created streams: AKBE_NATS_REPLICAS when set; otherwise 3 on a clustered
 * server (infra/nats/cluster is three nodes) and 1 on a single one.
 */
export function defaultReplicas(nc: NatsConnection, env: NodeJS.ProcessEnv = process.env): number {
  const fromEnv = Number(env.AKBE_NATS_REPLICAS);
  if (Number.isInteger(fromEnv) && fromEnv >= 1 && fromEnv <= 5) return fromEnv;
  return nc.info?.cluster ? 3 : 1;
}
