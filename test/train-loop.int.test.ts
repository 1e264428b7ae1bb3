/**
 * Issue 6 acceptance: a tiny world and a tiny policy train 2 steps through a real nats-server,
 * every effect over NATS (policy, search and trainer services, the rollout work queue), and the
 * log holds every rollout, label, target and step; the second step's rollouts carry version 1.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import t from 'tap';
import { CheckpointStore } from '../src/actors/checkpoints/checkpoints.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { runSpecOf } from '../src/actors/roles/roles.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { withNats } from './helpers/nats.js';
import { tinyRunFixture, tinySpec } from './helpers/tiny-run.js';

t.test(
  'a tiny policy trains 2 steps over NATS and the log holds every rollout, label, target and step',
  async (t) => {
    const fx = await tinyRunFixture();
    const nats = await withNats(t);
    const store = await EventStore.open(nats.nc);
    const runDir = mkdtempSync(join(tmpdir(), 'akbe-train-'));
    t.teardown(() => rmSync(runDir, { recursive: true, force: true }));
    const spec = tinySpec(fx);
    const lines: string[] = [];
    const result = await runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId: 'tiny2',
      spec,
      runDir,
      concurrency: 8,
      threads: 1,
      onStep: (r) => lines.push(`step ${r.step}`),
    });
    t.equal(result.steps, 2);
    t.equal(result.policyVersion, 2);
    t.same(lines, ['step 0', 'step 1'], 'one step report per learner step');

    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay('tiny2')) events.push(event);
    const of = <K extends AkbeEvent['type']>(type: K) =>
      events.filter((e): e is Extract<AkbeEvent, { type: K }> => e.type === type);

    const started = of('run.started');
    t.equal(started.length, 1);
    t.equal(started[0].data.config.gWithTool, 2, 'the whole config is logged');
    t.same(
      runSpecOf(started[0].data.config).train,
      spec.train,
      'the run spec round-trips through run.started',
    );
    t.equal(started[0].data.seeds.run, 7);

    const perStep = spec.train.batchQuestions * (spec.train.gWithTool + spec.train.gNoTool);
    const rollouts = of('rollout.completed');
    t.equal(rollouts.length, 2 * perStep, 'every rollout of both steps, once');
    t.equal(new Set(rollouts.map((e) => e.meta.rolloutId)).size, rollouts.length, 'no rollout twice');
    for (const e of rollouts) {
      t.equal(e.meta.policyVersion, e.meta.step, `${e.meta.rolloutId}: rolled out by version ${e.meta.step}`);
      t.equal(e.meta.seed, e.data.seed, 'the sampling seed is in the envelope');
    }
    t.ok(
      rollouts.filter((e) => e.meta.step === 1).every((e) => e.meta.policyVersion === 1),
      'step 1 used version 1',
    );
    t.equal(of('rollout.started').length, 2 * perStep);
    t.ok(of('rollout.turn').length >= 2 * perStep, 'at least one turn per rollout');

    const assigned = of('question.assigned');
    t.equal(assigned.length, 2 * spec.train.batchQuestions, 'gold answers of every question of every step');
    t.ok(assigned.every((e) => e.data.goldAnswers.length > 0));

    const groups = of('group.completed');
    t.equal(groups.length, 2 * spec.train.batchQuestions);
    const labels = of('boundary.labeled');
    t.equal(labels.length, 2 * spec.train.batchQuestions, 'one label per question per step');
    const byId = new Map(rollouts.map((e) => [e.meta.rolloutId, e]));
    for (const l of labels) {
      const g = groups.find((x) => x.meta.step === l.meta.step && x.meta.questionId === l.meta.questionId)!;
      t.ok(g, 'the labeled question has its group');
      const wt = g.data.withTool.rewards.some((r) => r > 0);
      const nt = g.data.noTool.rewards.some((r) => r > 0);
      t.same([l.data.wt, l.data.nt], [wt, nt], `${l.meta.questionId}: WT/NT follow the group's rewards`);
      if (l.data.targetRolloutId !== null) {
        const target = byId.get(l.data.targetRolloutId);
        t.ok(target && target.data.reward > 0, 'a target is a correct rollout of the question');
      } else t.equal(l.data.category, 'both-wrong');
      t.equal(l.meta.seed, l.data.tieBreakSeed, 'the tie-break seed is in the envelope');
    }

    const steps = of('learner.step');
    t.same(
      steps.map((e) => [e.meta.step, e.data.policyVersionBefore, e.data.policyVersionAfter]),
      [
        [0, 0, 1],
        [1, 1, 2],
      ],
    );
    t.ok(steps.every((e) => Number.isFinite(e.data.metrics.loss) && e.data.metrics.updates === 2));
    t.same(
      of('policy.published').map((e) => e.data.version),
      [1, 2],
    );
    t.equal(of('run.finished')[0]?.data.status, 'completed');

    // On-policy order: every rollout of step 1 was stored after version 1 was published.
    const seqOf = (e: AkbeEvent) => e.meta.seq ?? 0;
    const v1 = of('policy.published').find((e) => e.data.version === 1)!;
    t.ok(
      rollouts.filter((e) => e.meta.step === 1).every((e) => seqOf(e) > seqOf(v1)),
      'step 1 rolled out after v1 was published',
    );

    const ck = await CheckpointStore.open(nats.nc, 'tiny2', join(runDir, 'checkpoints'));
    t.equal(await ck.currentVersion(), 2, 'KV holds the current version');
    t.ok(existsSync(join(runDir, 'checkpoints', 'v2', 'model.safetensors')), 'a checkpoint per version');
  },
);
