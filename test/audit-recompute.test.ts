import t from 'tap';
import { auditRun } from '../src/audit/audit.js';
import { Collector } from '../src/audit/collector.js';
import { boundaryHistory, questionIdsOf } from '../src/audit/history.js';
import { settingsOf } from '../src/audit/recompute.js';
import { foldRunLog } from '../src/audit/run-log.js';
import type { AkbeEvent, EventOf } from '../src/events/catalog.js';
import { auditRunEvents, withSeqs } from './helpers/audit-run.js';

const run = await auditRunEvents({ runId: 'r1', steps: 3 });
const clean = withSeqs(run.events);

/** A deep copy of the log with one event changed by `edit` (the first event `pick` selects). */
function tamper<K extends AkbeEvent['type']>(
  type: K,
  pick: (e: EventOf<K>) => boolean,
  edit: (e: EventOf<K>) => void,
): { events: AkbeEvent[]; seq: number } {
  const events = clean.map((e) => structuredClone(e));
  const target = events.find((e) => e.type === type && pick(e as EventOf<K>)) as EventOf<K>;
  edit(target);
  return { events, seq: target.meta.seq! };
}

t.test("the machines' own log replays clean, every part recomputed", async (t) => {
  const r = auditRun(clean);
  t.same(r.mismatches, []);
  t.same(r.notes, []);
  t.equal(r.checked.rollouts, 3 * 3 * 5, 'steps x B x (G_wt + G_nt)');
  t.equal(r.checked.labels, 9);
  t.equal(r.checked.steps, 3);
  t.ok(r.checked.rows >= 27, 'every with-tool row (plus AKBE rows) of every step');
  const rewards = clean
    .filter((e) => e.type === 'rollout.completed')
    .map((e) => (e as EventOf<'rollout.completed'>).data);
  t.ok(rewards.some((d) => d.reward === 1) && rewards.some((d) => d.reward === 0), 'rewards vary');
  t.ok(
    rewards.some((d) => !d.formatOk),
    'some format failures',
  );
  const cats = new Set(
    clean
      .filter((e) => e.type === 'boundary.labeled')
      .map((e) => (e as EventOf<'boundary.labeled'>).data.category),
  );
  t.ok(cats.size >= 2, `several categories (${[...cats]})`);
});

t.test('a changed reward is reported once, at its own rollout.completed sequence', async (t) => {
  const { events, seq } = tamper(
    'rollout.completed',
    () => true,
    (e) => {
      e.data.reward = 1 - e.data.reward;
    },
  );
  const r = auditRun(events);
  t.same(
    r.mismatches.map((m) => [m.seq, m.field]),
    [[seq, 'reward']],
    'downstream labels and metrics use the recomputed reward, so nothing else differs',
  );
});

t.test('a changed answer text changes the recomputed reward (EM against the gold answers)', async (t) => {
  const { events, seq } = tamper(
    'rollout.completed',
    (e) => e.data.reward === 1 && e.data.segments !== undefined,
    (e) => {
      const last = e.data.segments!.at(-1)!;
      last.text = last.text.replace(/<answer>.*<\/answer>/, '<answer> berlin </answer>');
    },
  );
  const r = auditRun(events);
  t.same(
    r.mismatches.map((m) => [m.seq, m.field]),
    [
      [seq, 'answer'],
      [seq, 'reward'],
    ].concat(r.mismatches.filter((m) => m.seq !== seq).map((m) => [m.seq, m.field])),
  );
  t.ok(r.mismatches.every((m) => m.seq >= seq));
});

t.test(
  'a changed label, target, tie-break seed or previous category is named at its boundary.labeled',
  async (t) => {
    const cases: Array<
      [string, (e: EventOf<'boundary.labeled'>) => boolean, (e: EventOf<'boundary.labeled'>) => void]
    > = [
      ['targetRolloutId', (e) => e.data.targetRolloutId !== null, (e) => (e.data.targetRolloutId = 'nobody')],
      ['tieBreakSeed', () => true, (e) => (e.data.tieBreakSeed = (e.data.tieBreakSeed + 1) >>> 0)],
      ['previousCategory', (e) => e.data.previousCategory !== null, (e) => (e.data.previousCategory = null)],
      [
        'selectionRule',
        (e) => e.data.category === 'tool-dependent' || e.data.category === 'efficiency',
        (e) => (e.data.selectionRule = 'shortest-ever'),
      ],
    ];
    for (const [field, pick, edit] of cases) {
      const { events, seq } = tamper('boundary.labeled', pick, edit);
      t.same(
        auditRun(events).mismatches.map((m) => [m.seq, m.field]),
        [[seq, field]],
        field,
      );
    }
  },
);

t.test('a changed advantage, row role or step metric is named at its learner.step', async (t) => {
  const adv = tamper(
    'learner.step',
    () => true,
    (e) => {
      e.data.batch!.rows[0].advantage += 0.25;
    },
  );
  t.same(
    auditRun(adv.events).mismatches.map((m) => [m.seq, m.field]),
    [[adv.seq, 'batch.rows[0].advantage']],
  );
  const akbe = tamper(
    'learner.step',
    (e) => e.data.batch!.rows.some((r) => r.akbe),
    (e) => {
      const row = e.data.batch!.rows.find((r) => r.akbe)!;
      row.akbe = false;
    },
  );
  t.match(auditRun(akbe.events).mismatches, [{ seq: akbe.seq, field: /batch\.rows\[\d+\]\.akbe/ }]);
  const counts = tamper(
    'learner.step',
    () => true,
    (e) => {
      e.data.metrics.categoryCounts['both-wrong'] += 1;
    },
  );
  t.same(
    auditRun(counts.events).mismatches.map((m) => m.field),
    ['metrics.categoryCounts'],
  );
  // Each scalar step metric is compared on its own (a dropped check leaves its tamper unseen).
  for (const field of [
    'em',
    'tc',
    'tp',
    'meanResponseLength',
    'toolCallsPerBatch',
    'boundaryShifts',
  ] as const) {
    const m = tamper(
      'learner.step',
      (e) => typeof e.data.metrics[field] === 'number',
      (e) => {
        (e.data.metrics[field] as number) += 0.5;
      },
    );
    t.same(
      auditRun(m.events).mismatches.map((x) => [x.seq, x.field]),
      [[m.seq, `metrics.${field}`]],
      `metrics.${field}`,
    );
  }
});

t.test(
  "a question moved to another question's place in step.started is caught by its pool index",
  async (t) => {
    const started = clean.filter((e) => e.type === 'step.started') as EventOf<'step.started'>[];
    const first = new Set(started[0].data.questionIds);
    const later = started[1];
    // Two of step 1's questions that step 0 drew too, so the audit knows their pool indices.
    const [i, j] = later.data.questionIds.flatMap((id, k) => (first.has(id) ? [k] : []));
    t.ok(j !== undefined, 'step 1 repeats two of step 0 questions (pool 4, B 3)');
    const { events, seq } = tamper(
      'step.started',
      (e) => e.meta.seq === later.meta.seq,
      (e) => {
        const ids = e.data.questionIds;
        [ids[i], ids[j]] = [ids[j], ids[i]];
      },
    );
    t.same(
      auditRun(events).mismatches.map((m) => [m.seq, m.field]),
      [
        [seq, `questionIds[${i}] pool index`],
        [seq, `questionIds[${j}] pool index`],
      ],
      'the same questions, in an order sampleStepQuestions did not draw',
    );
  },
);

t.test('the comparison: arrays (plain and typed) and objects element by element', async (t) => {
  const c = new Collector();
  const where = { seq: 1, eventType: 'test', step: 0 };
  const same: Array<[unknown, unknown]> = [
    [
      [1, 2],
      [1, 2],
    ],
    [Int32Array.of(1, 2), [1, 2]],
    [[Number.NaN], [Number.NaN]],
    [
      { a: [1], b: 2 },
      { b: 2, a: [1] },
    ],
    [[], []],
  ];
  const differ: Array<[unknown, unknown]> = [
    [
      [1, 2],
      [2, 1],
    ],
    [
      [1, 2],
      [1, 2, 3],
    ],
    [['a'], ['b']],
    [[[1]], [[2]]],
    [[], [0]],
    [Int32Array.of(1, 2), [1, 3]],
    [Uint8Array.of(1), Uint8Array.of(0)],
    [{ a: 1 }, { a: 1, b: 2 }],
    [{ a: [1] }, { a: [2] }],
    [0, '0'],
    [null, undefined],
  ];
  for (const [a, b] of same) t.ok(c.check(where, 'f', a, b), `${JSON.stringify(a)} = ${JSON.stringify(b)}`);
  t.same(c.mismatches, []);
  for (const [a, b] of differ)
    t.notOk(c.check(where, 'f', a, b), `${JSON.stringify(a)} != ${JSON.stringify(b)}`);
  t.equal(c.mismatches.length, differ.length, 'each difference is recorded');
  // In a log: group.completed's rollout ids and rewards are plain arrays.
  const ids = tamper(
    'group.completed',
    (e) => e.data.withTool.rolloutIds.length > 1,
    (e) => e.data.withTool.rolloutIds.reverse(),
  );
  t.match(auditRun(ids.events).mismatches, [{ seq: ids.seq, field: 'withTool.rolloutIds' }]);
  const rewards = tamper(
    'group.completed',
    () => true,
    (e) => {
      e.data.noTool.rewards[0] = 1 - (e.data.noTool.rewards[0] ?? 0);
    },
  );
  t.same(
    auditRun(rewards.events).mismatches.map((m) => [m.seq, m.field]),
    [[rewards.seq, 'noTool.rewards']],
  );
});

t.test('the oracle rates in learner.step.extra are recomputed from the rollouts', async (t) => {
  const steps = clean.filter((e) => e.type === 'learner.step') as EventOf<'learner.step'>[];
  t.ok(
    steps.some((e) => e.data.extra.knownSearchRate !== undefined) &&
      steps.some((e) => e.data.extra.unknownNoSearchRate !== undefined),
    'the log records both rates, so the clean audit compared them',
  );
  // Planted: a wrong rate (as a sink that counted no-tool rollouts or the wrong questions would write).
  const wrong = tamper(
    'learner.step',
    (e) => e.data.extra.knownSearchRate !== undefined,
    (e) => {
      e.data.extra.knownSearchRate = e.data.extra.knownSearchRate === 1 ? 0.5 : 1;
    },
  );
  t.same(
    auditRun(wrong.events).mismatches.map((m) => [m.seq, m.field]),
    [[wrong.seq, 'extra.knownSearchRate']],
  );
  const dropped = tamper(
    'learner.step',
    (e) => e.data.extra.unknownNoSearchRate !== undefined,
    (e) => {
      delete e.data.extra.unknownNoSearchRate;
    },
  );
  t.match(auditRun(dropped.events).mismatches, [
    { seq: dropped.seq, field: 'extra.unknownNoSearchRate', recorded: undefined },
  ]);
  // Without the oracle in question.assigned a recorded rate has nothing to back it.
  const events = clean.map((e) => structuredClone(e));
  for (const e of events) if (e.type === 'question.assigned') delete e.data.known;
  const r = auditRun(events);
  t.same(
    r.mismatches.map((m) => m.field).sort(),
    steps
      .flatMap((e) => Object.keys(e.data.extra))
      .map((k) => `extra.${k}`)
      .sort(),
    'every recorded rate is reported',
  );
  t.match(r.notes, [/carries no oracle/]);
  // A log without the oracle and without rates (written before v2) is clean, with the note.
  for (const e of events) if (e.type === 'learner.step') e.data.extra = {};
  const old = auditRun(events);
  t.same(old.mismatches, []);
  t.same(old.notes, ['question.assigned carries no oracle (known): the oracle rates were not recomputed']);
});

t.test(
  'masks: an observation token marked as generated is caught against the turn and tool events',
  async (t) => {
    const { events, seq } = tamper(
      'rollout.completed',
      (e) => e.data.toolCalls > 0,
      (e) => {
        const i = e.data.lossMask.indexOf(0);
        e.data.lossMask[i] = 1;
      },
    );
    t.same(
      auditRun(events).mismatches.map((m) => [m.seq, m.field]),
      [[seq, 'lossMask (from turns and observations)']],
    );
  },
);

t.test('a different run seed or option in run.started shows up where it matters', async (t) => {
  const { events } = tamper(
    'run.started',
    () => true,
    (e) => {
      e.data.seeds.run = 999;
    },
  );
  const fields = new Set(auditRun(events).mismatches.map((m) => m.field));
  t.ok(fields.has('tieBreakSeed'), 'tie-break seeds derive from the run seed');
  t.ok(fields.has('batch.miniBatchSeed'));
});

t.test("a changed L_AKBE row weight, or the run's akbeAggregation, is named at the row", async (t) => {
  const weight = tamper(
    'learner.step',
    (e) => e.data.batch!.rows.some((r) => r.akbe),
    (e) => {
      const row = e.data.batch!.rows.find((r) => r.akbe)!;
      row.akbeWeight = row.akbeWeight! * 2;
    },
  );
  t.match(auditRun(weight.events).mismatches, [{ seq: weight.seq, field: /batch\.rows\[\d+\]\.akbeWeight/ }]);
  // The aggregation is read from run.started; a log without it trained 'pooled' (before session 3).
  const started = clean.find((e) => e.type === 'run.started') as EventOf<'run.started'>;
  t.equal(settingsOf(started).akbeAggregation, 'per-target');
  const old = structuredClone(started);
  delete (old.data.config as Record<string, unknown>).akbeAggregation;
  delete (old.data.config as Record<string, unknown>).toolCallCount;
  t.equal(settingsOf(old).akbeAggregation, 'pooled');
  t.ok(settingsOf(old).defaulted.includes('akbeAggregation'));
  t.equal(settingsOf(old).toolCallCount, 'executed', 'older logs counted executed calls only');
});

t.test('boundary history: one row per step the question was in, shifts marked', async (t) => {
  const log = foldRunLog(clean);
  const ids = questionIdsOf(log);
  t.ok(ids.length >= 3);
  let rows = 0;
  for (const id of ids) {
    const h = boundaryHistory(log, id);
    rows += h.length;
    for (let i = 1; i < h.length; i++) {
      t.equal(
        h[i].previousCategory,
        h[i - 1].category,
        `${id} step ${h[i].step}: previous is the last label`,
      );
      t.equal(h[i].shifted, h[i].category !== h[i - 1].category);
    }
    for (const row of h) {
      t.equal(row.withTool.total, 3);
      t.equal(row.noTool.total, 2);
      t.equal(row.wt, row.withTool.correct > 0, 'WT = any with-tool rollout correct');
      t.equal(row.nt, row.noTool.correct > 0, 'NT = any no-tool rollout correct');
      t.ok(row.seq > 0);
    }
  }
  t.equal(rows, 9, 'B questions per step x 3 steps');
});

t.test('the algorithm: the registered name, the old spelling, and a name nothing registered', async (t) => {
  const started = clean.find((e) => e.type === 'run.started') as EventOf<'run.started'>;
  const named = (algo: string) => {
    const e = structuredClone(started);
    e.data.algo = algo;
    delete (e.data.config as Record<string, unknown>).algo;
    return settingsOf(e).algo;
  };
  t.equal(named('dpo-akbe'), 'dpo-akbe', 'a registered name is itself');
  t.equal(named('grpo+akbe'), 'akbe', "run.started's spelling before session 9");
  // Before, any name with "akbe" in it read as akbe and every other unknown name as grpo: a run of
  // a plugin's algorithm replayed without its plugin audited as grpo; now it fails naming both.
  t.throws(() => named('my-akbe-variant'), /unknown algorithm 'my-akbe-variant'; known: akbe, /);
  t.throws(() => named('search-cost'), /unknown algorithm 'search-cost'/);
});
