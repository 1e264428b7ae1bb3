/**
 * NATS accounts (issue 23 item 1). The streams, KV and object store live in account `AKBE`, whose
 * JetStream API only its own users call. A role moved to an account of its own reaches exactly
 * what it needs through service imports of AKBE's exports, and nothing else of AKBE exists in its
 * account: a JetStream API subject it does not import has no responder there (an account without
 * JetStream answers none), so it cannot create, update or delete a consumer, purge, or roll up.
 *
 * What holds on nats-server 2.9.10 (tried before building on it; test/nats-accounts.int.test.ts):
 * - a JetStream publish through a service import is stored, answered with its PubAck, deduped by
 *   Nats-Msg-Id; a `Nats-Rollup` header is refused by the stream;
 * - `$JS.API.CONSUMER.INFO` and `MSG.NEXT` (response type stream) of an AKBE durable work through
 *   imports, and so do acks (`$JS.ACK.<stream>.>`): nats.js's consumers.get/fetch/consume unchanged;
 * - the reply subject of a request through an import is mapped by the server (`_R_.…`): the
 *   messages of a pull the importer asks for come back to the importer's account only, never to
 *   a service subject in AKBE (a `MSG.NEXT` with reply `akbe.<run>.svc.train` delivers nowhere);
 * - an import may map its subject: the rollout account's dead letters `akbe.<run>.dlq.<reason>.<key>`
 *   land as `akbe.<run>.dlq.<reason>.rollout.<key>`, a subject no other writer uses, so a rollout
 *   key cannot overwrite another writer's dead letter (the stream keeps one per subject).
 */
import {
  CHECKPOINT_BUCKET,
  COMMAND_STREAM,
  DEAD_LETTER_STREAM,
  EVENTS_STREAM,
} from '../../events/subjects.js';
import { RUNS_BUCKET } from './runs-bucket.js';

/** The account that holds the streams. */
export const STREAM_ACCOUNT = 'AKBE';

/** A service of AKBE one account imports: `subject` as AKBE exports it, `local` as the importer sees it. */
export interface AccountLink {
  subject: string;
  local?: string;
  /** The export answers with several messages (a pull's batch). */
  stream?: boolean;
}

export interface RoleAccount {
  name: string;
  links: AccountLink[];
}

const ALL_STREAMS = [
  EVENTS_STREAM,
  DEAD_LETTER_STREAM,
  COMMAND_STREAM,
  `KV_${RUNS_BUCKET}`,
  `OBJ_${CHECKPOINT_BUCKET}`,
];

/**
 * The rollout role: opens the stores (account and stream info; the streams exist before
 * run.started), reads run.started by one stream get and its run's status key, pulls and acks the run's work-queue durable
 * (created by the orchestrator), appends its own events, calls generate and search, and writes
 * dead letters under its own token. No consumer create/update/delete, no purge, no direct access
 * to any other subject of AKBE.
 */
const ROLLOUT: RoleAccount = {
  name: 'AKBE_ROLLOUT',
  links: [
    { subject: '$JS.API.INFO' },
    ...ALL_STREAMS.map((s) => ({ subject: `$JS.API.STREAM.INFO.${s}` })),
    { subject: `$JS.API.STREAM.MSG.GET.${EVENTS_STREAM}` },
    // A worker leaves when its run's status in KV says completed: that one key, by direct get
    // (nats.js reads KV that way; 2.9 buckets allow direct). No other KV key (no dedupe key, lock).
    { subject: `$JS.API.DIRECT.GET.KV_${RUNS_BUCKET}.$KV.${RUNS_BUCKET}.*.status` },
    { subject: `$JS.API.CONSUMER.INFO.${COMMAND_STREAM}.*` },
    { subject: `$JS.API.CONSUMER.MSG.NEXT.${COMMAND_STREAM}.*`, stream: true },
    { subject: `$JS.ACK.${COMMAND_STREAM}.>` },
    { subject: 'akbe.*.evt.rollout.>' },
    { subject: 'akbe.*.evt.tool.called' },
    { subject: 'akbe.*.svc.generate' },
    { subject: 'akbe.*.svc.search' },
    { subject: 'akbe.*.dlq.*.rollout.*', local: 'akbe.*.dlq.*.*' },
  ],
};

/** Roles with an account of their own; the others are users of AKBE with subject permissions. */
export const ROLE_ACCOUNTS: Readonly<Record<string, RoleAccount>> = { rollout: ROLLOUT };

const quote = (s: string) => JSON.stringify(s);

/** AKBE's `exports` block: each linked subject, to the accounts that import it. */
export function exportsConf(indent: string): string {
  const to = new Map<string, { accounts: string[]; stream: boolean }>();
  for (const acc of Object.values(ROLE_ACCOUNTS))
    for (const l of acc.links) {
      const e = to.get(l.subject) ?? { accounts: [], stream: false };
      e.accounts.push(acc.name);
      e.stream ||= !!l.stream;
      to.set(l.subject, e);
    }
  const lines = [...to].map(
    ([subject, e]) =>
      `${indent}  { service: ${quote(subject)}, accounts: [${e.accounts.join(', ')}]${e.stream ? ', response_type: stream' : ''} }`,
  );
  return [`${indent}exports: [`, ...lines, `${indent}]`].join('\n');
}

/** A role account's `imports` block. */
export function importsConf(acc: RoleAccount, indent: string): string {
  const lines = acc.links.map(
    (l) =>
      `${indent}  { service: { account: ${STREAM_ACCOUNT}, subject: ${quote(l.subject)} }${l.local ? `, to: ${quote(l.local)}` : ''} }`,
  );
  return [`${indent}imports: [`, ...lines, `${indent}]`].join('\n');
}

/** The subjects a role account's user publishes to: its imports as it sees them. */
export function importedSubjects(acc: RoleAccount): string[] {
  return acc.links.map((l) => l.local ?? l.subject);
}
