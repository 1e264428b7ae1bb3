/**
 * Asynchronous training benchmark (issue 13 item 6): the same run at maxStaleness 0, 1 and 2, with
 * a search service that answers `--latency` ms late (searchLatencyMs, as a remote retrieval server
 * would) and `--workers` rollout worker processes (`akbe worker --role rollout`); the orchestrator
 * process serves search, policy and trainer. Per run: rollouts per second (rollouts / run wall
 * time), step wall time (run wall / steps), trainer idle (wall - Σ trainSeconds), rollout idle
 * (wall time with no rollout in flight: the policy and search had nothing to do), the last step's
 * train EM/TC, and the dev evaluation of the final version (greedy, `--eval` questions). Printed:
 * each figure per η and seed, and the ratio of rollouts/s against η = 0 of the same seed, run in
 * the same process.
 *
 *   npm run build && node dist/bench/async.js [--seeds 3] [--steps 4] [--latency 200] [--workers 2]
 *     [--concurrency 4] [--etas 0,1,2] [--eval 16] [--trainer embedded|process]
 *
 * --trainer process runs the trainer as a worker process of its own (`akbe worker --role trainer`)
 * instead of in the orchestrator's process; each version then reaches the policy through the
 * object store.
 *
 * The world is the seed-0 world cut to 8 training questions and the policy the committed base
 * (assets/base), as test/helpers/tiny-run.ts's baseRunFixture builds them (built here if missing).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { jetstream } from '@nats-io/jetstream';
import { connectLocal } from '../src/actors/nats/connection.js';
import { startNatsServer } from '../src/actors/nats/nats-server.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { runEnvironment } from '../src/actors/roles/roles.js';
import { evaluateSplit } from '../src/actors/rollout/evaluate.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { checkpointLimits } from '../src/gpu/checkpoint.js';
import { validateTrainConfig } from '../src/rl/config.js';
import { DEFAULT_TOOLS, toolsNamed } from '../src/tools/registry.js';
import { DEFAULT_WORLD } from '../src/world/config.js';
import { writeWorld } from '../src/world/files.js';
import { generateWorld } from '../src/world/generate.js';
import { median } from './probe.js';

const { values: flags } = parseArgs({
  options: {
    seeds: { type: 'string', default: '3' },
    steps: { type: 'string', default: '4' },
    latency: { type: 'string', default: '200' },
    workers: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '4' },
    etas: { type: 'string', default: '0,1,2' },
    eval: { type: 'string', default: '16' },
    trainer: { type: 'string', default: 'embedded' },
  },
});
const seeds = Number(flags.seeds);
const steps = Number(flags.steps);
const latency = Number(flags.latency);
const workers = Number(flags.workers);
const concurrency = Number(flags.concurrency);
const etas = flags.etas.split(',').map(Number);
const evalQuestions = Number(flags.eval);
if (flags.trainer !== 'embedded' && flags.trainer !== 'process')
  throw new Error(`--trainer must be embedded or process, got ${flags.trainer}`);
/** process: the trainer is a worker process of its own, so an update never waits for a decode step. */
const trainerProcess = flags.trainer === 'process';

/** The seed-0 world cut to 8 training questions (baseRunFixture's, shared with the tests). */
async function worldDir(): Promise<string> {
  const dir = resolve('.akbe/test-fixtures/world-seed0-pool8');
  if (existsSync(join(dir, 'world.json'))) return dir;
  mkdirSync(resolve('.akbe/test-fixtures'), { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  await writeWorld(generateWorld({ ...DEFAULT_WORLD, seed: 0 }), tmp);
  const train = join(tmp, 'questions', 'train.jsonl');
  writeFileSync(train, `${readFileSync(train, 'utf8').split('\n').slice(0, 8).join('\n')}\n`);
  renameSync(tmp, dir);
  return dir;
}

interface Measured {
  eta: number;
  seed: number;
  wallS: number;
  rollouts: number;
  rolloutsPerS: number;
  stepS: number;
  trainerIdleS: number;
  rolloutIdleS: number;
  /** Lines of the rollout workers saying a rollout failed (each retried by redelivery). */
  workerFailures: string[];
  /** Search calls per rollout: a policy that learns to search less also rolls out faster. */
  callsPerRollout: number;
  trainEm: number;
  trainTc: number;
  evalEm: number;
  evalTc: number;
}

/** Wall time of [t0, t1] covered by no interval (rollout.started -> rollout.completed). */
function idleOutside(intervals: Array<[number, number]>, t0: number, t1: number): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let idle = 0;
  let at = t0;
  for (const [s, e] of sorted) {
    if (s > at) idle += s - at;
    at = Math.max(at, e);
  }
  return idle + Math.max(0, t1 - at);
}

async function runOnce(eta: number, seed: number, world: string, steps: number): Promise<Measured> {
  const home = mkdtempSync(join(tmpdir(), 'akbe-bench-async-'));
  const server = await startNatsServer({ storeDir: join(home, 'nats') });
  const nc = await connectLocal(server);
  const store = await EventStore.open(nc);
  const runId = `async-e${eta}-s${seed}`;
  const spec = {
    train: validateTrainConfig({
      algo: 'akbe',
      steps,
      batchQuestions: 4,
      miniBatchQuestions: 2,
      gWithTool: 4,
      gNoTool: 2,
      maxToolCalls: 2,
      maxResponseTokens: 64,
      seed,
      maxStaleness: eta,
    }),
    worldDir: world,
    basePolicy: resolve('assets/base'),
    topK: 3,
  };
  const cli = resolve('dist/src/cli/main.js');
  const outputs: string[] = [];
  const roles = trainerProcess ? ['rollout', 'trainer'] : ['rollout'];
  const procs = Array.from({ length: workers + roles.length - 1 }, (_, i) => {
    const role = i < workers ? 'rollout' : 'trainer';
    const args = ['worker', '--run-id', runId, '--role', role, '--concurrency', String(concurrency)];
    const p = spawn(process.execPath, [cli, ...args, '--nats', server.url, '--home', home], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    outputs[i] = '';
    p.stdout.on('data', (d) => {
      outputs[i] += d;
    });
    p.stderr.on('data', (d) => {
      outputs[i] += d;
    });
    return p;
  });
  // The clock starts once every worker serves the run (their start-up is not the pipeline's).
  const serving = async () => {
    const deadline = Date.now() + 180_000;
    while (!outputs.every((o) => /serving run/.test(o))) {
      if (Date.now() > deadline) throw new Error(`rollout workers did not start:\n${outputs.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const env = await runEnvironment(spec);
  const tools = toolsNamed(DEFAULT_TOOLS, { topK: 3 });
  const context = (await checkpointLimits(spec.basePolicy)).context;
  let evalScore = { em: Number.NaN, tc: Number.NaN };
  let t0 = 0;
  let t1 = 0;
  try {
    await runTraining({
      nc,
      js: jetstream(nc),
      store,
      runId,
      spec,
      runDir: join(home, 'runs', runId),
      roles: trainerProcess ? ['search', 'policy'] : ['search', 'policy', 'trainer'],
      threads: 1,
      searchLatencyMs: latency,
      beforeRun: async () => {
        await serving();
        t0 = Date.now();
      },
      afterRun: async (c) => {
        t1 = Date.now();
        const { score } = await evaluateSplit({
          nc: c.nc,
          runId: c.runId,
          version: c.version,
          worldDir: world,
          split: 'dev',
          limit: evalQuestions,
          topK: 3,
          context,
          env,
          tools,
          limits: {
            toolTags: tools.map((x) => x.tag),
            maxToolCalls: spec.train.maxToolCalls,
            maxResponseTokens: spec.train.maxResponseTokens,
          },
        });
        evalScore = { em: score.em, tc: score.tc };
      },
    });
    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(runId)) events.push(event);
    const startedAt = new Map<string, number>();
    const intervals: Array<[number, number]> = [];
    for (const e of events) {
      if (e.type === 'rollout.started') startedAt.set(e.meta.rolloutId!, e.meta.at);
      if (e.type === 'rollout.completed') {
        const s = startedAt.get(e.meta.rolloutId!);
        if (s !== undefined) intervals.push([s, e.meta.at]);
      }
    }
    const learner = events.filter((e) => e.type === 'learner.step') as EventOf<'learner.step'>[];
    const wallS = (t1 - t0) / 1000;
    const rollouts = events.filter((e) => e.type === 'rollout.completed').length;
    const trainS = learner.reduce((a, e) => a + e.data.metrics.trainSeconds, 0);
    const last = learner.at(-1)!.data.metrics;
    return {
      eta,
      seed,
      wallS,
      rollouts,
      rolloutsPerS: rollouts / wallS,
      stepS: wallS / steps,
      trainerIdleS: wallS - trainS,
      rolloutIdleS: idleOutside(intervals, t0, t1) / 1000,
      callsPerRollout: events.filter((e) => e.type === 'tool.called').length / rollouts,
      workerFailures: outputs.flatMap((o) => o.split('\n').filter((l) => /failed|refus/i.test(l))),
      trainEm: last.em,
      trainTc: last.tc,
      evalEm: evalScore.em,
      evalTc: evalScore.tc,
    };
  } finally {
    for (const p of procs) p.kill('SIGKILL');
    await nc.close().catch(() => undefined);
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

const world = await worldDir();
console.log(
  `bench/async: ${steps} steps x 4 questions x (4 wt + 2 nt), search latency ${latency} ms, ${workers} rollout workers x concurrency ${concurrency}, seeds ${seeds}, load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
// Untimed: the first run in a process pays for JIT and cold caches (~15% of a 24-step run),
// which would otherwise land on eta 0 of seed 0 alone.
const warm = await runOnce(etas[0], seeds, world, 2);
console.log(`warm-up (eta ${etas[0]}, 2 steps, not counted): ${warm.rolloutsPerS.toFixed(2)} rollouts/s`);
const all: Measured[] = [];
for (let seed = 0; seed < seeds; seed++)
  for (const eta of etas) {
    const m = await runOnce(eta, seed, world, steps);
    all.push(m);
    const base = all.find((x) => x.seed === seed && x.eta === etas[0])!;
    console.log(
      `eta ${eta} seed ${seed}: ${m.rollouts} rollouts in ${m.wallS.toFixed(1)} s = ${m.rolloutsPerS.toFixed(2)}/s (x${(m.rolloutsPerS / base.rolloutsPerS).toFixed(2)} vs eta ${etas[0]}), step ${m.stepS.toFixed(1)} s, trainer idle ${m.trainerIdleS.toFixed(1)} s, rollouts idle ${m.rolloutIdleS.toFixed(1)} s, ${m.callsPerRollout.toFixed(2)} calls/rollout, last-step train EM ${m.trainEm.toFixed(3)} TC ${m.trainTc.toFixed(2)}, dev EM ${m.evalEm.toFixed(3)} TC ${m.evalTc.toFixed(2)}, worker failures ${m.workerFailures.length}${m.workerFailures.length ? `: ${m.workerFailures[0]}` : ''}`,
    );
  }
console.log('medians over seeds:');
for (const eta of etas) {
  const of = (k: keyof Measured) => median(all.filter((m) => m.eta === eta).map((m) => m[k] as number));
  const ratios = all
    .filter((m) => m.eta === eta)
    .map((m) => m.rolloutsPerS / all.find((x) => x.seed === m.seed && x.eta === etas[0])!.rolloutsPerS);
  const spread = (k: keyof Measured) => {
    const xs = all.filter((m) => m.eta === eta).map((m) => m[k] as number);
    return `${Math.min(...xs).toFixed(3)}-${Math.max(...xs).toFixed(3)}`;
  };
  console.log(
    `eta ${eta}: ${of('rolloutsPerS').toFixed(2)} rollouts/s (x${median(ratios).toFixed(2)} vs eta ${etas[0]}), step ${of('stepS').toFixed(1)} s, trainer idle ${of('trainerIdleS').toFixed(1)} s, rollouts idle ${of('rolloutIdleS').toFixed(1)} s, ${of('callsPerRollout').toFixed(2)} calls/rollout, dev EM ${of('evalEm').toFixed(3)} (${spread('evalEm')}) TC ${of('evalTc').toFixed(2)} (${spread('evalTc')})`,
  );
}
process.exit(0);
