/**
 * Issue 11 item 2 acceptance (fuzz): while a tiny run trains, 10,000 malformed and wrongly typed
 * messages are published onto every subject the run listens to: its rollout work queue
 * (cmd.rollout), the policy, search and trainer services (as requests with a reply subject and as
 * bare publishes), the trainer's progress subject and the completion events the orchestrator
 * follows. The run finishes, its audit passes, and every bad message is accounted for: each request
 * got an error reply, each other message is in the dead letters (counted per subject).
 *
 * The fuzzer connects with the orchestrator's credentials (all subjects): what it tests is the
 * validation at the edge, not the permissions that would already stop an outsider.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { pack, unpack } from '../src/actors/nats/wire.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { trainProgressSubject } from '../src/actors/services/trainer/trainer-service.js';
import { auditPassed, auditRun } from '../src/audit/audit.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { commandSubject, eventSubject, serviceSubject } from '../src/events/subjects.js';
import { Rng } from '../src/util/rng.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

const rng = new Rng(20261201);

/** A value of the wrong kind for any field the edge checks. */
function wrongValue(): unknown {
  const kinds = [
    () => 'x',
    () => Number.NaN,
    () => -1,
    () => 1e300,
    () => null,
    () => [1, 'a', null],
    () => ({ nested: true }),
    () => new Float32Array([Number.POSITIVE_INFINITY]),
    () => true,
    () => 'x'.repeat(5000),
  ];
  return kinds[rng.int(kinds.length)]();
}

/** A well-formed template with one field broken (wrong type, removed) or an unknown field added. */
function mutate(template: Record<string, unknown>): Record<string, unknown> {
  const out = { ...template };
  const keys = Object.keys(out);
  const k = keys[rng.int(keys.length)];
  const how = rng.int(3);
  if (how === 0) delete out[k];
  else if (how === 1) out[`evil${rng.int(100)}`] = wrongValue();
  else {
    let v = wrongValue();
    // keep it wrong for this field: a number field gets a non-number, and vice versa
    if (typeof out[k] === 'number' && typeof v === 'number' && Number.isFinite(v) && v >= 0) v = 'x';
    out[k] = v;
  }
  return out;
}

function randomBytes(): Uint8Array {
  const b = new Uint8Array(1 + rng.int(64));
  for (let i = 0; i < b.length; i++) b[i] = rng.int(256);
  b[0] = 0xc1; // msgpack's "never used" byte: not a valid start for JSON either
  return b;
}

const generateTemplate = {
  policyVersion: 0,
  prompt: [1, 2, 3],
  maxNewTokens: 4,
  seed: 1,
  temperature: 1,
  topP: 1,
  stopTokens: [2],
};
const trainTemplate = {
  step: 0,
  policyVersion: 0,
  batch: { rows: 1 },
  losses: [{ name: 'grpo', options: {} }],
  lr: 1e-3,
  epochs: 1,
  rowsPerUpdate: 1,
  padId: 0,
};
const commandTemplate = (runId: string) => ({ runId, step: 0, input: { rolloutId: 'evil' } });
const envelope = { type: 'rollout.completed', v: 2, data: { reward: 'x' }, meta: { runId: 'x' } };

type Encode = (v: unknown) => Uint8Array;
const json: Encode = (v) => new TextEncoder().encode(JSON.stringify(v));
const msgpack: Encode = (v) => pack(v);

function badMessage(template: Record<string, unknown>, encode: Encode): Uint8Array {
  const r = rng.int(10);
  if (r === 0) return randomBytes();
  if (r === 1) return encode(wrongValue());
  return encode(mutate(template));
}

async function pool(n: number, width: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

/** Sends `n` bad requests and returns how many were answered with an error. */
async function fuzzRequests(
  nc: NatsConnection,
  subject: string,
  n: number,
  make: () => Uint8Array,
  isError: (d: Uint8Array) => boolean,
) {
  let answered = 0;
  await pool(n, 64, async () => {
    const reply = await nc.request(subject, make(), { timeout: 30_000 });
    if (isError(reply.data)) answered++;
  });
  return answered;
}

t.test(
  '10,000 malformed messages onto every subject of a live run: it finishes clean, each is accounted for',
  async (t) => {
    const fx = await tinyRunFixture();
    const nats = await withNats(t);
    const store = await EventStore.open(nats.nc);
    const fuzzer = await nats.connectAs('orchestrator');
    const home = mkdtempSync(join(tmpdir(), 'akbe-fuzz-'));
    t.teardown(() => rmSync(home, { recursive: true, force: true }));
    const runId = 'fuzz1';
    const js = jetstream(fuzzer);
    const msgpackError = (d: Uint8Array) => (unpack(d) as { ok: boolean }).ok === false;
    const jsonError = (d: Uint8Array) => typeof JSON.parse(new TextDecoder().decode(d)).error === 'string';

    let startFuzz: () => void = () => undefined;
    const stepStarted = new Promise<void>((r) => {
      startFuzz = r;
    });
    const sent = { cmd: 0, evt: 0, progress: 0, bare: { generate: 0, search: 0, train: 0 } };
    const answered = { generate: 0, search: 0, train: 0 };
    const requests = { generate: 2_500, search: 1_500, train: 1_000 };
    const fuzz = stepStarted.then(async () => {
      const t0 = Date.now();
      const bare = async (service: 'generate' | 'search' | 'train', n: number, make: () => Uint8Array) => {
        for (let i = 0; i < n; i++) fuzzer.publish(serviceSubject(runId, service), make());
        sent.bare[service] += n;
      };
      const gen = () => badMessage(generateTemplate, msgpack);
      // Search takes unknown keys and a missing or null topk: only `queries` or a non-null topk can be wrong.
      const search = () => {
        const r = rng.int(4);
        if (r === 0) return randomBytes();
        if (r === 1) return json({ queries: wrongValue() });
        if (r === 2) return json(wrongValue());
        const topk = wrongValue(); // NaN and null both become JSON null, which means "the default"
        return json({ queries: ['a'], topk: topk === null || Number.isNaN(topk) ? 'x' : topk });
      };
      const train = () => badMessage(trainTemplate, msgpack);
      await bare('generate', 500, gen);
      await bare('search', 500, search);
      await bare('train', 500, train);
      for (let i = 0; i < 1_000; i++)
        fuzzer.publish(trainProgressSubject(runId), badMessage({ step: 0, done: 1, total: 2 }, json));
      sent.progress = 1_000;
      await pool(1_500, 64, async () => {
        await js.publish(commandSubject(runId, 'rollout'), badMessage(commandTemplate(runId), msgpack));
        sent.cmd++;
      });
      await pool(1_000, 64, async () => {
        await js.publish(eventSubject(runId, 'rollout.completed'), badMessage(envelope, msgpack));
        sent.evt++;
      });
      answered.generate = await fuzzRequests(
        fuzzer,
        serviceSubject(runId, 'generate'),
        requests.generate,
        gen,
        msgpackError,
      );
      answered.search = await fuzzRequests(
        fuzzer,
        serviceSubject(runId, 'search'),
        requests.search,
        search,
        jsonError,
      );
      answered.train = await fuzzRequests(
        fuzzer,
        serviceSubject(runId, 'train'),
        requests.train,
        train,
        msgpackError,
      );
      await fuzzer.flush();
      t.comment(`fuzz: 10,000 messages in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    });

    const result = await runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId,
      spec: tinySpec(fx, { steps: 2 }),
      runDir: join(home, runId),
      threads: 1,
      onFact: (f) => {
        if (f.type === 'step.started') startFuzz();
      },
      // The last step may end before the fuzzer does: keep the services up until it is done.
      afterRun: () => fuzz,
    });
    await fuzz;
    const total =
      sent.cmd +
      sent.evt +
      sent.progress +
      Object.values(sent.bare).reduce((a, b) => a + b) +
      Object.values(requests).reduce((a, b) => a + b);
    t.equal(total, 10_000, '10,000 malformed messages sent');
    t.equal(result.steps, 2, 'the run finished');
    t.same(answered, requests, 'every bad request was answered with an error');

    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) events.push(event);
    const audit = auditRun(events);
    t.same(audit.mismatches, []);
    t.same(audit.errors, []);
    t.ok(auditPassed(audit), 'the audit passes');

    // Give the dead letters of the last bare publishes a moment to be written, then count them.
    const count = async () => {
      const bySubject = new Map<string, number>();
      for await (const d of store.deadLetters(runId))
        bySubject.set(d.originalSubject, (bySubject.get(d.originalSubject) ?? 0) + 1);
      return bySubject;
    };
    const expected = new Map([
      [commandSubject(runId, 'rollout'), sent.cmd],
      [eventSubject(runId, 'rollout.completed'), sent.evt],
      [trainProgressSubject(runId), sent.progress],
      [serviceSubject(runId, 'generate'), sent.bare.generate],
      [serviceSubject(runId, 'search'), sent.bare.search],
      [serviceSubject(runId, 'train'), sent.bare.train],
    ]);
    let got = await count();
    for (let i = 0; i < 20 && [...expected].some(([s, n]) => got.get(s) !== n); i++) {
      await new Promise((r) => setTimeout(r, 500));
      got = await count();
    }
    t.same(
      Object.fromEntries(got),
      Object.fromEntries(expected),
      'every other bad message is dead-lettered, once',
    );
  },
);
