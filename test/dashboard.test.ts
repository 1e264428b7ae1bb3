/**
 * The dashboard's pure parts and its relay reader: who may talk to it, how transcripts are cut,
 * one point per step, experiment reports checked field by field, statecharts flattened from a
 * machine definition, and the actor tree as a real inspector relay delivers it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WebSocket } from 'ws';
import { startInspectorRelay } from '../src/actors/inspect/inspect-relay.js';
import { type ActorsDelta, ActorsFeed } from '../src/dashboard/actors-feed.js';
import { readExperiments } from '../src/dashboard/experiments.js';
import { machineDefinitions } from '../src/dashboard/machine-definitions.js';
import { withPoint } from '../src/dashboard/points.js';
import { transcriptBlocks } from '../src/dashboard/question-view.js';
import { RunIndex } from '../src/dashboard/run-index.js';
import { createEvent } from '../src/events/catalog.js';
import { checkRequest } from '../src/util/http-guard.js';
import { activePaths, flatten } from '../web/dashboard/statechart-graph.js';

t.test('requests must name this server and come from its own pages, GET only', async (t) => {
  const rules = { host: '127.0.0.1', methods: ['GET', 'HEAD'] };
  const req = (headers: { host?: string; origin?: string }, method = 'GET') =>
    checkRequest({ method, headers }, 8090, rules);
  t.same(req({ host: '127.0.0.1:8090' }), { ok: true });
  t.same(req({ host: 'localhost:8090', origin: 'http://localhost:8090' }), { ok: true });
  t.same(req({ host: '[::1]:8090' }), { ok: true }, 'an IPv6 literal');
  t.match(req({ host: 'evil.example:8090' }), { ok: false, status: 403 }, 'DNS rebinding: a foreign name');
  t.match(req({ host: '127.0.0.1:8091' }), { ok: false, status: 403 }, 'another port');
  t.match(req({ host: '127.0.0.1' }), { ok: false, status: 403 }, 'no port means 80');
  t.match(req({}), { ok: false, status: 403 }, 'no Host');
  t.match(
    req({ host: '127.0.0.1:8090', origin: 'http://evil.example' }),
    { ok: false, status: 403, reason: /Origin http:\/\/evil\.example/ },
    'a cross-site page',
  );
  t.match(
    req({ host: '127.0.0.1:8090', origin: 'null' }),
    { ok: false, status: 403 },
    'a sandboxed or file page',
  );
  t.match(req({ host: '127.0.0.1:8090' }, 'POST'), { ok: false, status: 405 });
  t.same(
    checkRequest({ method: 'HEAD', headers: { host: 'trainer:7000' } }, 7000, { host: 'trainer' }),
    {
      ok: true,
    },
    'the bound host name itself',
  );
});

t.test('transcripts are cut into the grammar blocks; loose or unclosed text shows as text', async (t) => {
  t.same(
    transcriptBlocks([
      { kind: 'generated', text: '<think> a b </think> <search> q </search>' },
      { kind: 'observation', text: ' <information> Doc 1 </information>' },
      { kind: 'generated', text: ' <answer> paris </answer>' },
    ]),
    [
      { kind: 'think', text: 'a b' },
      { kind: 'search', text: 'q' },
      { kind: 'information', text: 'Doc 1' },
      { kind: 'answer', text: 'paris' },
    ],
  );
  t.same(transcriptBlocks([{ kind: 'generated', text: 'hello <answer> x' }]), [
    { kind: 'text', text: 'hello' },
    { kind: 'text', text: '<answer> x' },
  ]);
  t.same(
    transcriptBlocks([{ kind: 'generated', text: '<think> a </answer> b </think>' }]),
    [{ kind: 'think', text: 'a </answer> b' }],
    'a stray closing tag of another block stays inside the open one',
  );
  t.same(transcriptBlocks([]), []);
});

const meta = { runId: 'r1', policyVersion: 0 };
const started = createEvent(
  'run.started',
  { algo: 'akbe', config: {}, seeds: { run: 1 }, worldRef: 'w', policyRef: 'p', akbeVersion: '0' },
  { ...meta, step: 0 },
);
const metrics = (em: number) => ({
  loss: 0.5,
  lossGrpo: 0.4,
  lossAkbe: 0.1,
  gradNorm: 1,
  clipFrac: 0,
  kl: 0,
  entropy: 1,
  em,
  tc: 1,
  tp: em,
  categoryCounts: { 'tool-dependent': 1, efficiency: 0, hallucination: 0, 'both-wrong': 1 },
  boundaryShifts: 0,
  meanResponseLength: 10,
  toolCallsPerBatch: 2,
  tokensPerSecond: 100,
  rolloutSeconds: 1,
  trainSeconds: 2,
  updates: 1,
});
const learnerStep = (step: number, em: number, at?: number) =>
  createEvent(
    'learner.step',
    {
      policyVersionBefore: step,
      policyVersionAfter: step + 1,
      metrics: metrics(em),
      extra: { noToolEm: 0.25, trainReward: 0.5 },
    },
    { ...meta, step, policyVersion: step, ...(at ? { at } : {}) },
  );

t.test('the run index keeps each event once and one point per step', async (t) => {
  const index = new RunIndex();
  t.ok(index.add(started));
  t.ok(index.add(learnerStep(0, 0.5)));
  t.notOk(index.add(learnerStep(0, 0.5)), 'the same event from the live push and the bounded read');
  t.same(index.merge(new Map([['r1', [learnerStep(1, 0.75)]]])), ['r1']);
  const view = index.view('r1')!;
  t.same(
    view.points.map((p) => [p.step, p.em, p.noToolEm, p.policyVersion, p.extra]),
    [
      [0, 0.5, 0.25, 1, { trainReward: 0.5 }],
      [1, 0.75, 0.25, 2, { trainReward: 0.5 }],
    ],
  );
  t.equal(view.summary.status, 'running');
  t.same(view.summary.latest?.em, 0.75);
  t.equal(index.view('nope'), null);
  t.same(
    index.summaries().map((s) => s.runId),
    ['r1'],
  );
  const p = view.points[0];
  t.same(
    withPoint([p, { ...p, step: 2 }], { ...p, em: 0.9 }).map((x) => [x.step, x.em]),
    [
      [0, 0.9],
      [2, 0.5],
    ],
    'a step pushed again replaces its point',
  );
});

t.test('experiment reports are read per spec; a bad one says which field and why', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'akbe-exp-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.same(await readExperiments(join(dir, 'absent')), [], 'no dir: no experiments');
  const write = (name: string, body: unknown) => {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'report.json'), typeof body === 'string' ? body : JSON.stringify(body));
  };
  write('a-good', {
    title: 'GRPO vs AKBE',
    tables: [
      {
        title: 'dev',
        columns: ['algo', 'EM'],
        rows: [
          ['grpo', 0.95],
          ['akbe', null],
        ],
      },
    ],
    plots: [
      { title: 'EM', x: { label: 'step', values: [0, 1] }, series: [{ label: 'akbe', values: [0.9, null] }] },
    ],
  });
  write('b-short-row', { tables: [{ title: 't', columns: ['a', 'b'], rows: [['x']] }] });
  write('c-not-json', '{');
  write('d-plot', {
    plots: [{ title: 'p', x: { label: 's', values: [0, 1] }, series: [{ label: 'a', values: [1] }] }],
  });
  mkdirSync(join(dir, 'e-no-report'));
  const got = await readExperiments(dir);
  t.same(
    got.map((e) => e.name),
    ['a-good', 'b-short-row', 'c-not-json', 'd-plot'],
  );
  t.same(got[0].tables[0].rows, [
    ['grpo', 0.95],
    ['akbe', null],
  ]);
  t.same(got[0].plots[0].series[0].values, [0.9, null]);
  t.equal(got[0].error, undefined);
  t.match(got[1].error, /tables\[0\]\.rows\[0\] must hold 2/);
  t.match(got[2].error, /c-not-json\/report\.json/);
  t.match(got[3].error, /plots\[0\]\.series\[0\]\.values must hold 2/);
});

t.test('statecharts: every state and transition of the rollout machine, and the active paths', async (t) => {
  const defs = machineDefinitions();
  t.same(Object.keys(defs).sort(), ['learner', 'question', 'rollout', 'run']);
  const { states, transitions } = flatten(defs.rollout as never);
  t.same([...states.keys()].sort(), ['callingTool', 'deciding', 'done', 'generating', 'observed']);
  const edges = transitions.map((x) => `${x.from}>${x.to}:${x.label}`).sort();
  t.same(edges, [
    'callingTool>observed:done: callTool',
    'deciding>callingTool:[wantsTool?]',
    'deciding>done:[isFinished?]',
    'generating>deciding:done: generate',
    'generating>done:[outOfTokens?]',
    'observed>done:[outOfTokens?]',
    'observed>generating:always',
  ]);
  t.same(activePaths('generating'), ['generating']);
  t.same(activePaths({ running: { step: 'training' } }), [
    'running',
    'running.step',
    'running.step.training',
  ]);
  const nested = flatten({
    id: 'm',
    states: {
      a: { initial: 'x', states: { x: { on: { GO: '#m.b', NEXT: 'y' } }, y: { on: { UP: '.z' } } } },
      b: {},
    },
  });
  t.same(
    nested.transitions.map((x) => `${x.from}>${x.to}`),
    ['a.x>b', 'a.x>a.y'],
    'absolute (#id) and sibling targets; a target that names no state is dropped',
  );
});

t.test('the actor tree follows a real inspector relay, definitions sent once', async (t) => {
  const relay = await startInspectorRelay({ port: 0 });
  t.teardown(() => relay.close());
  const feed = new ActorsFeed([relay.wsUrl], { flushMs: 10, maxActors: 3 });
  t.teardown(() => feed.close());
  const deltas: ActorsDelta[] = [];
  feed.onChange((d) => deltas.push(d));
  const until = async (ok: () => boolean) => {
    for (let i = 0; i < 1500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  };
  await until(() => feed.relays()[0].connected);
  t.same(feed.relays(), [{ url: relay.wsUrl, connected: true }]);

  const machine = JSON.stringify({
    id: 'rollout',
    initial: 'generating',
    states: { generating: {}, done: {} },
  });
  const sender = new WebSocket(relay.producerUrl); // only producers may send
  await new Promise((r) => sender.once('open', r));
  const send = (m: object) => sender.send(JSON.stringify(m));
  const actor = (sessionId: string, parentId?: string, status = 'active') =>
    send({
      type: '@xstate.actor',
      name: sessionId === 'x:1' ? 'question.s0.q1' : 'rollout',
      sessionId,
      parentId,
      definition: machine,
      snapshot: { value: 'generating', status, context: { rolloutId: `s0.q1.wt${sessionId}` } },
    });
  actor('x:1');
  actor('x:2', 'x:1');
  send({ type: '@xstate.event', sessionId: 'x:2', event: { type: 'xstate.done.actor.generate' } });
  send({ type: '@xstate.snapshot', sessionId: 'x:2', snapshot: { value: 'done', status: 'done' } });
  sender.send('not json');
  send({ type: '@xstate.snapshot', sessionId: 'x:unknown', snapshot: { value: 'done' } });
  await until(() => deltas.some((d) => d.actors.some((a) => a.sessionId === 'x:2' && a.value === 'done')));
  const x2 = feed.snapshot().actors.find((a) => a.sessionId === 'x:2')!;
  t.match(x2, { parentId: 'x:1', machine: 'rollout', key: 's0.q1.wtx:2', value: 'done', status: 'done' });
  t.same(
    x2.events.map((e) => e.type),
    ['xstate.done.actor.generate'],
  );
  t.equal(Object.keys(feed.snapshot().definitions).length, 1, 'one definition for both actors');
  t.equal(
    deltas.reduce((n, d) => n + Object.keys(d.definitions).length, 0),
    1,
    'the definition is pushed once',
  );

  actor('x:3', 'x:1');
  actor('x:4', 'x:1');
  await until(() => feed.snapshot().actors.some((a) => a.sessionId === 'x:4'));
  t.same(
    feed
      .snapshot()
      .actors.map((a) => a.sessionId)
      .sort(),
    ['x:1', 'x:3', 'x:4'],
    'past maxActors the oldest finished actor goes first',
  );
  sender.close();

  await relay.close();
  await until(() => !feed.relays()[0].connected);
  t.notOk(feed.relays()[0].connected, 'a relay that went away is reported');
});
