/**
 * NATS authentication and authorization: one nkey user per role, each holding only the subjects
 * its role needs (docs/security.md has the table and the reasons). The streams' account is `AKBE`;
 * roles listed in nats-accounts.ts (the rollout role) live in accounts of their own.
 *
 *   <auth dir>/auth.conf      server config fragment: the account, users' public keys, permissions
 *   <auth dir>/<role>.nk      a role's nkey seed (ed25519), mode 0600
 *
 * The auth dir is `AKBE_NATS_AUTH_DIR` or `<home>/nats/auth`. Seeds are generated once and kept;
 * auth.conf is rewritten from them (so a permission change here reaches the next server start).
 * A client picks its credentials with `natsCredentials`: `AKBE_NATS_CREDS` (a seed file, the way to
 * hand one role to a worker on another machine) or the role's seed in the auth dir.
 *
 * Anonymous clients are refused: the config defines no `no_auth_user`.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createUser, fromSeed } from '@nats-io/nkeys';
import { CHECKPOINT_BUCKET } from '../../events/subjects.js';
import {
  exportsConf,
  importedSubjects,
  importsConf,
  ROLE_ACCOUNTS,
  STREAM_ACCOUNT,
} from './nats-accounts.js';
import { RUNS_BUCKET } from './runs-bucket.js';

export const NATS_ROLES = ['orchestrator', 'rollout', 'policy', 'search', 'trainer', 'viewer'] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

export class NatsCredentialsError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.name = 'NatsCredentialsError';
  }
}

export interface Permissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[] };
  /** Lets a service answer requests on their reply subjects (and nothing else on _INBOX). */
  allow_responses?: boolean;
}

const KV_STREAM = `KV_${RUNS_BUCKET}`;
const OBJ_STREAM = `OBJ_${CHECKPOINT_BUCKET}`;
const EVENT_STREAMS = ['AKBE_EVENTS', 'AKBE_DEAD_LETTERS'];

/**
 * Reading streams: info, consumers (the ordered ones of replays delete themselves), gets.
 * No stream update, purge or delete.
 */
function jsRead(streams: string[], deleteConsumers = true): string[] {
  return [
    '$JS.API.INFO',
    '$JS.API.STREAM.NAMES',
    '$JS.API.STREAM.LIST',
    ...streams.flatMap((s) => [
      `$JS.API.STREAM.INFO.${s}`,
      `$JS.API.STREAM.MSG.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}`,
      `$JS.API.DIRECT.GET.${s}.>`,
      `$JS.API.CONSUMER.CREATE.${s}`,
      `$JS.API.CONSUMER.CREATE.${s}.>`,
      `$JS.API.CONSUMER.INFO.${s}.*`,
      `$JS.API.CONSUMER.MSG.NEXT.${s}.*`,
      ...(deleteConsumers ? [`$JS.API.CONSUMER.DELETE.${s}.*`] : []),
    ]),
    '$JS.ACK.>',
    '$JS.FC.>',
  ];
}

/** Creating a stream that already exists with the same config is a no-op; another config is refused by the server. */
function jsCreate(streams: string[]): string[] {
  return streams.map((s) => `$JS.API.STREAM.CREATE.${s}`);
}

const WORKER_STREAMS = [...EVENT_STREAMS, KV_STREAM, OBJ_STREAM];
/**
 * The runs bucket is read key by key (nats.js's kv.get is a direct get by subject on 2.9): a
 * role reads a run's status and policy pointer, never its lock or dedupe key, and opens no
 * consumer on it.
 */
const KV_READ = [
  `$JS.API.STREAM.INFO.${KV_STREAM}`,
  ...['status', 'policy'].map((k) => `$JS.API.DIRECT.GET.${KV_STREAM}.$KV.${RUNS_BUCKET}.*.${k}`),
];
/** Every worker opens the event store and the checkpoint store, and may be the first to connect. */
const WORKER_JS = [...jsRead([...EVENT_STREAMS, OBJ_STREAM]), ...KV_READ, ...jsCreate(WORKER_STREAMS)];
const INBOX = '_INBOX.>';

/**
 * Per-role permissions. The orchestrator owns the run (it starts every role in-process by default)
 * and may do anything in the account; every other role gets an allow-list.
 */
export function rolePermissions(role: NatsRole): Permissions {
  switch (role) {
    case 'orchestrator':
      return { publish: { allow: ['>'] }, subscribe: { allow: ['>'] }, allow_responses: true };
    case 'rollout':
      // An account of its own (nats-accounts.ts): it publishes only to what it imports from AKBE
      // (its work queue's pulls and acks, its own events, generate, search, its dead letters).
      return { publish: { allow: importedSubjects(ROLE_ACCOUNTS.rollout) }, subscribe: { allow: [INBOX] } };
    case 'policy':
      return {
        publish: { allow: [...WORKER_JS, 'akbe.*.dlq.>'] },
        subscribe: { allow: [INBOX, 'akbe.*.svc.generate'] },
        allow_responses: true,
      };
    case 'search':
      return {
        publish: { allow: [...WORKER_JS, 'akbe.*.dlq.>'] },
        subscribe: { allow: [INBOX, 'akbe.*.svc.search'] },
        allow_responses: true,
      };
    case 'trainer':
      return {
        publish: {
          allow: [
            ...WORKER_JS,
            // Publishing a checkpoint: object chunks + metadata and the purge of a replaced
            // object. No KV write: the orchestrator sets the run's current version (run-steps.ts).
            // Open until accounts (issue 23 item 1): a rollup header on a meta subject, or a
            // purge, can still empty the whole object stream.
            `$O.${CHECKPOINT_BUCKET}.>`,
            `$JS.API.STREAM.PURGE.${OBJ_STREAM}`,
            'akbe.*.svc.train.progress',
            'akbe.*.dlq.>',
          ],
        },
        subscribe: { allow: [INBOX, 'akbe.*.svc.train'] },
        allow_responses: true,
      };
    case 'viewer':
      return {
        publish: { allow: [...jsRead([...EVENT_STREAMS, OBJ_STREAM]), ...KV_READ] },
        subscribe: { allow: [INBOX, 'akbe.*.evt.>', 'akbe.*.svc.train.progress'] },
      };
  }
}

export function natsAuthDir(home: string, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.AKBE_NATS_AUTH_DIR || join(home, 'nats', 'auth'));
}

export function seedPath(dir: string, role: NatsRole): string {
  return join(dir, `${role}.nk`);
}

export function authConfPath(dir: string): string {
  return join(dir, 'auth.conf');
}

function quote(s: string): string {
  return JSON.stringify(s);
}

function permissionsConf(p: Permissions, indent: string): string {
  const list = (xs: string[]) => `[${[...new Set(xs)].map(quote).join(', ')}]`;
  const lines = [
    `publish: { allow: ${list(p.publish.allow)}${p.publish.deny ? `, deny: ${list(p.publish.deny)}` : ''} }`,
    `subscribe: { allow: ${list(p.subscribe.allow)} }`,
    ...(p.allow_responses ? ['allow_responses: true'] : []),
  ];
  return lines.map((l) => `${indent}${l}`).join('\n');
}

/** The server config fragment for these users' public keys: AKBE, then each role account. */
export function authConf(publicKeys: Record<NatsRole, string>): string {
  const user = (role: NatsRole) =>
    `      # ${role}\n      { nkey: ${publicKeys[role]}, permissions: {\n${permissionsConf(rolePermissions(role), '        ')}\n      } }`;
  const own = (role: NatsRole) => ROLE_ACCOUNTS[role] !== undefined;
  const roleAccounts = NATS_ROLES.filter(own).map((role) =>
    [
      `  ${ROLE_ACCOUNTS[role].name}: {`,
      '    users: [',
      user(role),
      '    ]',
      importsConf(ROLE_ACCOUNTS[role], '    '),
      '  }',
    ].join('\n'),
  );
  return [
    "# Generated by akbe (src/actors/nats/nats-auth.ts, nats-accounts.ts): the streams' account AKBE and",
    '# the role accounts that import from it; one nkey user per role.',
    '# No no_auth_user: a client without credentials is refused. Seeds (<role>.nk) stay beside this file.',
    'accounts {',
    `  ${STREAM_ACCOUNT}: {`,
    '    jetstream: enabled',
    '    users: [',
    NATS_ROLES.filter((r) => !own(r))
      .map(user)
      .join('\n'),
    '    ]',
    exportsConf('    '),
    '  }',
    ...roleAccounts,
    '}',
    '',
  ].join('\n');
}

function writePrivate(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600); // writeFileSync's mode applies only to a new file
}

/** Creates the missing seeds (0600) and rewrites auth.conf; returns the auth dir. */
export function ensureNatsAuth(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const keys = {} as Record<NatsRole, string>;
  for (const role of NATS_ROLES) {
    const path = seedPath(dir, role);
    if (!existsSync(path)) writePrivate(path, `${new TextDecoder().decode(createUser().getSeed())}\n`);
    keys[role] = readSeed(path).getPublicKey();
  }
  writePrivate(authConfPath(dir), authConf(keys));
  return dir;
}

/** The key pair of a seed file; the error names the file and what is wrong with it. */
export function readSeed(path: string): ReturnType<typeof fromSeed> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new NatsCredentialsError(
      `cannot read NATS seed ${path}: ${(err as Error).message}; run akbe nats auth (or set AKBE_NATS_CREDS)`,
      path,
    );
  }
  try {
    return fromSeed(new TextEncoder().encode(text));
  } catch {
    throw new NatsCredentialsError(
      `${path} is not an nkey user seed (expected one line starting with SU); regenerate it with akbe nats auth`,
      path,
    );
  }
}

export interface NatsCredentials {
  seed: Uint8Array;
  /** Where the seed came from (shown in errors). */
  path: string;
  role: NatsRole | 'custom';
}

/**
 * The credentials a client should present: `AKBE_NATS_CREDS` (a seed file), else the role's seed
 * in the auth dir, else null (the connection is then anonymous and a secured server refuses it).
 */
export function natsCredentials(
  home: string,
  role: NatsRole,
  env: NodeJS.ProcessEnv = process.env,
): NatsCredentials | null {
  if (env.AKBE_NATS_CREDS) {
    const path = resolve(env.AKBE_NATS_CREDS);
    readSeed(path);
    return { seed: new TextEncoder().encode(readFileSync(path, 'utf8').trim()), path, role: 'custom' };
  }
  const path = seedPath(natsAuthDir(home, env), role);
  if (!existsSync(path)) return null;
  readSeed(path);
  return { seed: new TextEncoder().encode(readFileSync(path, 'utf8').trim()), path, role };
}
