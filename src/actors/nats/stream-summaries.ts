/** What `akbe nats status` shows of a server's JetStream streams. */

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/** One JetStream stream as `akbe nats status` shows it. */
export interface StreamSummary {
  name: string;
  messages: number;
  bytes: number;
  firstSeq: number;
  lastSeq: number;
  consumers: number;
  replicas: number;
  subjects: string[];
}

/** The server's streams, by name; null when the server has no JetStream. */
export async function streamSummaries(nc: NatsConnection): Promise<StreamSummary[] | null> {
  let jsm: Awaited<ReturnType<typeof jetstreamManager>>;
  try {
    jsm = await jetstreamManager(nc);
  } catch {
    return null;
  }
  const out: StreamSummary[] = [];
  for await (const si of jsm.streams.list()) {
    const s = si.state;
    out.push({
      name: si.config.name,
      messages: s.messages,
      bytes: s.bytes,
      firstSeq: s.first_seq,
      lastSeq: s.last_seq,
      consumers: s.consumer_count,
      replicas: si.config.num_replicas,
      subjects: si.config.subjects ?? [],
    });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
