import { createWebSocketReceiver } from '@statelyai/inspect';
import t from 'tap';
import { WebSocket } from 'ws';
import { createActor, fromPromise, toPromise } from 'xstate';
import { compactForInspector, connectInspector, startInspector } from '../src/actors/inspect/inspect.js';
import { InspectorPortInUseError } from '../src/actors/inspect/inspect-relay.js';
import { learnerMachine, type TrainRequest, type TrainResult } from '../src/machines/learner.js';
import { questionMachine } from '../src/machines/question.js';
import { rolloutMachine } from '../src/machines/rollout.js';
import { runMachine } from '../src/machines/run.js';
import { lossTermsFor } from '../src/rl/algorithms/index.js';
import { DEFAULT_TRAIN_CONFIG } from '../src/rl/config.js';
import { fakeSearch, type ScriptedCalls, scriptedGenerate, ToyTokenizer } from './helpers/scripted-policy.js';

interface Msg {
  type: string;
  sessionId: string;
  name?: string;
  definition?: string;
  snapshot?: { value?: unknown; status?: string };
}

/** A plain WebSocket viewer of the relay, collecting every message it receives. */
async function viewer(url: string) {
  const ws = new WebSocket(url);
  const msgs: Msg[] = [];
  ws.on('message', (data) => msgs.push(JSON.parse(String(data))));
  const closed = new Promise((r) => ws.once('close', r));
  await new Promise((r, j) => {
    ws.once('open', r);
    ws.once('error', j);
  });
  return { ws, msgs, closed };
}

function tinyRun() {
  const tok = new ToyTokenizer();
  const calls: ScriptedCalls = { generate: [], search: [] };
  const generate = scriptedGenerate(tok, calls, (req) =>
    req.path === 'no-tool' || req.turn > 0
      ? '<answer> paris </answer>'
      : '<search> capital of france </search>',
  );
  const machine = runMachine.provide({
    actors: {
      question: questionMachine.provide({
        actors: {
          rollout: rolloutMachine.provide({ actors: { generate, callTool: fakeSearch(tok, calls) } }),
        },
      }),
      learner: learnerMachine.provide({
        actors: {
          train: fromPromise<TrainResult, TrainRequest>(async ({ input }) => ({
            version: input.policyVersion + 1,
            metrics: { loss: 0.5 },
          })),
        },
      }),
    },
  });
  const input = {
    runSeed: 1,
    steps: 1,
    questions: [
      {
        id: 'q0',
        gold: ['Paris'],
        withToolPrompt: tok.encode('WT q0 ?'),
        noToolPrompt: tok.encode('NT q0 ?'),
      },
    ],
    batchQuestions: 1,
    gWithTool: 2,
    gNoTool: 1,
    limits: { maxToolCalls: 2, maxResponseTokens: 64 },
    learner: {
      miniBatchQuestions: 1,
      algo: 'akbe' as const,
      advantage: 'grpo',
      targetSelection: 'min-tool-calls' as const,
      targetContext: 'with-tool' as const,
      losses: lossTermsFor(DEFAULT_TRAIN_CONFIG),
    },
  };
  return { machine, input, calls };
}

const machineOf = (m: Msg) => (m.definition ? (JSON.parse(m.definition) as { id: string }).id : undefined);

t.test(
  'a WebSocket client of the relay receives actor and snapshot messages of the run, question and rollout machines, offline',
  async (t) => {
    const insp = await startInspector({ port: 0, open: false });
    t.teardown(() => insp.close());
    t.match(insp.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const v = await viewer(insp.wsUrl);
    const { machine, input, calls } = tinyRun();
    const actor = createActor(machine, { input, inspect: insp.inspect });
    actor.start();
    t.same(await toPromise(actor), { steps: 1, policyVersion: 1 });
    t.equal(calls.generate.length, 2 * 2 + 1, 'two turns per with-tool rollout, one no-tool');
    await insp.close();
    await v.closed;

    const kinds = new Map<string, string>(); // sessionId -> machine id
    for (const m of v.msgs) if (m.type === '@xstate.actor') kinds.set(m.sessionId, machineOf(m) ?? '?');
    const actorsOf = (id: string) => [...kinds.values()].filter((k) => k === id).length;
    t.equal(actorsOf('run'), 1, 'one run actor');
    t.equal(actorsOf('question'), 1, 'one question actor');
    t.equal(actorsOf('rollout'), 3, 'G_wt + G_nt = 3 rollout actors');
    t.equal(actorsOf('learner'), 1, 'one learner actor');
    const snapshots = (id: string) =>
      v.msgs.filter((m) => m.type === '@xstate.snapshot' && kinds.get(m.sessionId) === id);
    for (const id of ['run', 'question', 'rollout', 'learner'])
      t.ok(snapshots(id).length > 0, `snapshot messages for the ${id} machine`);
    t.ok(
      snapshots('rollout').some((m) => m.snapshot?.value === 'callingTool'),
      'a with-tool rollout was seen in its callingTool state',
    );
    t.ok(
      snapshots('run').some((m) => m.snapshot?.status === 'done'),
      'the run machine was seen finishing',
    );
    t.ok(
      v.msgs.some((m) => m.type === '@xstate.event'),
      'event messages too',
    );
    t.equal(insp.sent, v.msgs.length, 'every message the client sent reached the viewer');
  },
);

t.test('a viewer that connects late still receives every actor registration', async (t) => {
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());
  const { machine, input } = tinyRun();
  const actor = createActor(machine, { input, inspect: insp.inspect });
  actor.start();
  await toPromise(actor);
  await new Promise((r) => setTimeout(r, 50));
  const v = await viewer(insp.wsUrl);
  await insp.close();
  await v.closed;
  const machines = new Set(['run', 'question', 'rollout', 'learner']);
  const registered = v.msgs
    .filter((m) => m.type === '@xstate.actor')
    .map(machineOf)
    .filter((id) => machines.has(id ?? ''));
  t.ok(
    v.msgs.some((m) => m.type === '@xstate.actor' && machineOf(m) === '0.rollout.callingTool'),
    'invoked service actors (search) are registered too',
  );
  t.same(
    registered.sort(),
    ['learner', 'question', 'rollout', 'rollout', 'rollout', 'run'],
    'the whole actor tree, though the viewer came after the run',
  );
});

t.test('a busy port is a one-line error naming the flag; close() leaves nothing running', async (t) => {
  const a = await startInspector({ port: 0 });
  await t.rejects(startInspector({ port: a.port }), InspectorPortInUseError);
  await t.rejects(startInspector({ port: a.port }), { message: /--inspect-port/ });
  const v = await viewer(a.wsUrl);
  await a.close();
  await v.closed;
  t.equal(v.ws.readyState, WebSocket.CLOSED, 'viewers are disconnected, so the process can exit');
  await a.close(); // idempotent
});

t.test('the bridge page embeds the Stately inspector and connects back to its own host', async (t) => {
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());
  const html = await (await fetch(insp.url)).text();
  t.match(html, /<iframe[^>]+src="https:\/\/stately\.ai\/inspect"/);
  t.match(html, /@statelyai\.connected/);
  t.match(html, /location\.host/);
});

t.test("@statelyai/inspect's own WebSocket receiver reads the relay (same wire format)", async (t) => {
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());
  const got: Array<{ type: string }> = [];
  const receiver = createWebSocketReceiver({ server: insp.wsUrl });
  receiver.subscribe((e) => got.push(e));
  await new Promise((r) => setTimeout(r, 200)); // the receiver has no open signal
  const { machine, input } = tinyRun();
  const actor = createActor(machine, { input, inspect: insp.inspect });
  actor.start();
  await toPromise(actor);
  await insp.close(); // also ends the receiver's socket, which has no close of its own
  t.ok(got.some((e) => e.type === '@xstate.actor'));
  t.ok(got.some((e) => e.type === '@xstate.snapshot'));
});

t.test("a second process's machines join the same inspector through connectInspector", async (t) => {
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());
  const v = await viewer(insp.wsUrl);
  const worker = connectInspector(insp.producerUrl); // as a rollout worker of a cluster would
  const { machine, input } = tinyRun();
  const a = createActor(machine, { input, inspect: insp.inspect });
  const b = createActor(machine, { input, inspect: worker.inspect });
  a.start();
  b.start();
  await Promise.all([toPromise(a), toPromise(b)]);
  await worker.close();
  await insp.close();
  await v.closed;
  const runs = v.msgs.filter((m) => m.type === '@xstate.actor' && machineOf(m) === 'run');
  t.equal(runs.length, 2, 'both run actors, from both clients');
  t.equal(v.msgs.length, insp.sent + worker.sent);
});

t.test(
  'a large question pool is not serialised into every run snapshot (time and message size)',
  async (t) => {
    const insp = await startInspector({ port: 0 });
    t.teardown(() => insp.close());
    const v = await viewer(insp.wsUrl);
    const { machine, input } = tinyRun();
    const prompt = Array.from({ length: 64 }, (_, i) => i + 1);
    const pool = Array.from({ length: 5000 }, (_, i) => ({
      id: `p${i}`,
      gold: ['x'],
      withToolPrompt: prompt,
      noToolPrompt: prompt,
    }));
    const actor = createActor(machine, {
      input: { ...input, questions: [input.questions[0], ...pool] },
      inspect: insp.inspect,
    });
    const t0 = performance.now();
    actor.start();
    await toPromise(actor);
    await new Promise((r) => setTimeout(r, 20));
    // Measured here: ~0.4 s; serialising the uncut pool into every run snapshot took ~17 s.
    const ms = performance.now() - t0;
    t.ok(ms < 6000, `inspected run with a 5000-question pool in ${ms.toFixed(0)} ms`);
    await insp.close();
    await v.closed;
    const raw = v.msgs.map((m) => JSON.stringify(m).length);
    t.ok(raw.length > 50);
    t.ok(Math.max(...raw) < 64_000, `largest message ${Math.max(...raw)} bytes (the pool alone is ~1.3 MB)`);
  },
);

t.test('payloads are compacted: typed arrays and long lists summarised, cycles cut', async (t) => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  t.same(
    compactForInspector({ ids: new Int32Array(300), xs: Array.from({ length: 20 }, (_, i) => i), c: cyclic }),
    {
      ids: 'Int32Array(300)',
      xs: [...Array.from({ length: 16 }, (_, i) => i), '… 4 more (20 items)'],
      c: { a: 1, self: '[circular]' },
    },
  );
});
