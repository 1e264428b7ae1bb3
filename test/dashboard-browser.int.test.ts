/**
 * Issue 15 acceptance, in a real browser (Debian's chromium driven by playwright-core; .ci/run
 * installs it): one tiny run (3 steps) trains through a real nats-server with the inspector relay
 * on, while `akbe dashboard`'s server (same code as the command) shows it. The subtests share that
 * run: the run page gets its points live, one per step; the runs table lists it; a question page
 * shows its rollouts with the target marked; the actors page draws a rollout's statechart with the
 * state the relay last reported; the page survives a dashboard restart and a NATS restart; and the
 * browser logs no console error throughout.
 *
 * Screenshots go to AKBE_SCREENSHOTS (docs/ refreshes the README's: AKBE_SCREENSHOTS=docs), else
 * to a temp dir.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { chromium, type Page } from 'playwright-core';
import t from 'tap';
import { WebSocket } from 'ws';
import { openDashboardSource } from '../src/actors/inspect/dashboard-source.js';
import { startInspector } from '../src/actors/inspect/inspect.js';
import { runTraining } from '../src/actors/orchestrator/orchestrator.js';
import { ActorsFeed } from '../src/dashboard/actors-feed.js';
import { buildDashboardAssets } from '../src/dashboard/bundle.js';
import { type Dashboard, startDashboard } from '../src/dashboard/server.js';
import type { AkbeEvent } from '../src/events/catalog.js';
import { EventStore } from '../src/events/store.js';
import { runCli } from './helpers/cli.js';
import { withNats } from './helpers/nats.js';
import { seed0WorldFixture, tinySpec } from './helpers/tiny-run.js';

const CHROMIUM = '/usr/bin/chromium';
const RUN = 'dash1';
const STEPS = 3;

t.test('akbe dashboard in chromium, over one tiny run', async (t) => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)`);
  const shots = resolve(process.env.AKBE_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'akbe-shots-')));
  mkdirSync(shots, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'akbe-dash-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));

  // The committed base on the default world: it answers most questions, so labels have targets.
  const worldDir = await seed0WorldFixture();
  const fx = { worldDir, policyDir: resolve('assets/base') };
  const [nats, assets] = await Promise.all([withNats(t), buildDashboardAssets(join(work, 'assets'))]);
  const store = await EventStore.open(nats.nc);
  const insp = await startInspector({ port: 0 });
  t.teardown(() => insp.close());

  // An independent viewer of the relay: the last state each actor reported.
  const lastValue = new Map<string, { name?: string; value?: unknown }>();
  const viewer = new WebSocket(insp.wsUrl);
  viewer.on('message', (data) => {
    const m = JSON.parse(String(data));
    const a = lastValue.get(m.sessionId) ?? {};
    if (m.type === '@xstate.actor') a.name = m.name;
    if (m.snapshot && 'value' in m.snapshot) a.value = m.snapshot.value;
    lastValue.set(m.sessionId, a);
  });
  t.teardown(() => viewer.close());

  const source = await openDashboardSource({ url: nats.server.url, env: {} });
  const actors = new ActorsFeed([insp.wsUrl]);
  t.teardown(async () => {
    actors.close();
    await source.close();
  });
  const serve = (port = 0) =>
    startDashboard({
      source,
      actors,
      assetsDir: assets.outDir,
      experimentsDir: join(work, 'experiments'),
      runsDir: join(work, 'runs'),
      port,
    });
  let dash: Dashboard = await serve();
  t.teardown(() => dash.close());

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  t.teardown(() => browser.close());
  const page: Page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(`${m.text()} (${m.location().url})`);
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  const runReads: string[] = [];
  page.on('request', (r) => {
    if (r.url().endsWith(`/api/runs/${RUN}`)) runReads.push(r.url());
  });
  const stepsShown = async () => Number((await page.locator('.charts').getAttribute('data-steps')) ?? 0);

  await t.test('the run page fills in live, one point per learner step as it is pushed', async (t) => {
    await page.goto(`${dash.url}#/run/${RUN}`);
    await page.waitForSelector(`[data-waiting="${RUN}"]`);
    const runDir = join(work, 'run');
    let finished = false;
    const training = runTraining({
      nc: nats.nc,
      js: jetstream(nats.nc),
      store,
      runId: RUN,
      // Seed 18 draws one known and one unknown question at each of the 3 steps (the world's
      // oracle), so both known-search rates have a value at every step.
      spec: tinySpec(fx, { steps: STEPS, seed: 18 }),
      runDir,
      concurrency: 8,
      threads: 1,
      inspect: insp.inspect,
    }).finally(() => {
      finished = true;
    });
    const seenWhileTraining: number[] = [];
    for (let k = 1; k <= STEPS; k++) {
      // Polled from here: the page's CSP (rightly) refuses playwright's string predicates.
      const deadline = Date.now() + 120_000;
      while ((await stepsShown()) < k) {
        if (Date.now() > deadline) throw new Error(`the run page never showed ${k} points`);
        await new Promise((r) => setTimeout(r, 50));
      }
      if (!finished) seenWhileTraining.push(await stepsShown());
    }
    const result = await training;
    t.equal(result.steps, STEPS);
    t.ok(
      seenWhileTraining.length > 0 && seenWhileTraining[0] < STEPS,
      `a point appeared while the run trained (${seenWhileTraining})`,
    );
    t.ok(
      runReads.length <= 2,
      `points arrived as pushes, not re-reads of the run (${runReads.length} reads)`,
    );

    const learnerSteps: number[] = [];
    const oracleRates = { knownSearchRate: 0, unknownNoSearchRate: 0 };
    for await (const { event } of store.replay(RUN))
      if (event.type === 'learner.step') {
        learnerSteps.push(event.meta.step);
        for (const k of ['knownSearchRate', 'unknownNoSearchRate'] as const)
          if (event.data.extra[k] !== undefined) oracleRates[k]++;
      }
    t.equal(learnerSteps.length, STEPS, 'the log holds one learner.step per step');
    t.same(
      oracleRates,
      { knownSearchRate: STEPS, unknownNoSearchRate: STEPS },
      "the world's oracle rates are recorded at every step",
    );
    await page.waitForSelector('.status.completed');
    const points = await page.$$eval('.chart', (els) =>
      els.map((e) => [e.id, Number(e.getAttribute('data-points'))]),
    );
    t.ok(
      points.length >= 8,
      'EM, TC/TP, categories, shifts, known-search, loss, tokens/s and seconds charts',
    );
    for (const [id, n] of points) t.equal(n, STEPS, `${id}: one point per step`);
    // The known-search chart: both rates, a value at every step.
    const known = page.locator('#chart-known-search');
    t.equal(await known.getAttribute('data-points'), String(STEPS), 'known-search: one point per step');
    t.equal(await known.getAttribute('data-values'), `${STEPS},${STEPS}`, 'known-search: no gaps');
    // Tall enough for the third row of charts (the known-search rates).
    await page.setViewportSize({ width: 1200, height: 1000 });
    await page.screenshot({ path: join(shots, 'dashboard-run.png') });
    await page.setViewportSize({ width: 1200, height: 760 });
  });

  await t.test('the audit runs on request and finds the run clean', async (t) => {
    await page.click('text=Run the audit');
    const verdict = await page.waitForSelector('.audit[data-verdict]', { timeout: 60_000 });
    t.equal(await verdict.getAttribute('data-verdict'), 'clean');
    t.notMatch(await verdict.textContent(), /no oracle/, 'the oracle rates were recomputed and agree');
    const none = await page.waitForSelector('.verify[data-verify]');
    t.equal(await none.getAttribute('data-verify'), 'none', 'not verified yet: the panel says how');
    t.match(await none.textContent(), `akbe replay --run ${RUN} --verify-training`);
  });

  await t.test('the audit panel shows the verdict akbe replay --verify-training kept', async (t) => {
    const v = await runCli(
      'replay',
      '--run',
      RUN,
      '--verify-training',
      '--nats',
      nats.server.url,
      '--home',
      work,
    );
    t.equal(v.code, 0, v.out + v.err);
    await page.click('text=Run it again');
    await page.waitForSelector('.audit[data-verdict]', { timeout: 60_000 });
    const kept = await page.waitForSelector('.verify[data-verify="ok"]', { timeout: 60_000 });
    t.match(await kept.textContent(), `training verified: ${STEPS} steps re-derived from v0`);
  });

  await t.test('the runs table lists the run with its steps and status', async (t) => {
    await page.goto(`${dash.url}#/`);
    const row = await page.waitForSelector(`tr[data-run="${RUN}"]`);
    const cells = await row.$$eval('td', (tds) => tds.map((td) => td.textContent?.trim()));
    t.equal(cells[0], RUN);
    t.equal(cells[1], 'completed');
    t.equal(cells[3], String(STEPS));
    t.equal(cells[4], `v${STEPS}`);
    await page.screenshot({ path: join(shots, 'dashboard-runs.png') });
  });

  await t.test('a question page shows every rollout of each step with the target marked', async (t) => {
    const events: AkbeEvent[] = [];
    for await (const { event } of store.replay(RUN)) events.push(event);
    const labels = events.filter((e) => e.type === 'boundary.labeled');
    // A with-tool target when there is one (its transcript shows search and information blocks).
    const labelled =
      labels.find((e) => e.data.category === 'tool-dependent') ??
      labels.find((e) => e.data.targetRolloutId !== null) ??
      labels[0];
    t.ok(
      labelled.data.targetRolloutId,
      `question ${labelled.meta.questionId} has a target at step ${labelled.meta.step}`,
    );
    const q = labelled.meta.questionId;
    const done = events.filter((e) => e.type === 'rollout.completed' && e.meta.questionId === q);
    await page.goto(`${dash.url}#/run/${RUN}/question/${q}`);
    await page.waitForSelector('.question .rollout');
    t.equal(await page.locator('.rollout').count(), done.length, 'one transcript per recorded rollout');
    const step = page.locator(`.qstep[data-step="${labelled.meta.step}"]`);
    const targets = await step
      .locator('.rollout.target')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-rollout-id')));
    t.same(targets, [labelled.data.targetRolloutId], 'exactly the labelled target is marked');
    t.ok(await step.locator('.rollout.target .badge').isVisible(), 'the target carries its badge');
    t.ok((await page.locator('.block.answer').count()) > 0, 'answer blocks are shown');
    await page.screenshot({ path: join(shots, 'dashboard-question.png'), fullPage: false });
  });

  await t.test(
    "the actors page draws a rollout's statechart with the state the relay reported",
    async (t) => {
      await page.goto(`${dash.url}#/actors`);
      const first = await page.waitForSelector('a.actor[data-machine="rollout"]');
      const sessionId = (await first.getAttribute('data-session'))!;
      await first.click();
      const chart = await page.waitForSelector('svg.statechart[data-machine="rollout"]', { timeout: 30_000 });
      const states = await chart.$$eval('g.state', (gs) => gs.map((g) => g.getAttribute('data-state')));
      t.same(
        states.sort(),
        ['callingTool', 'deciding', 'done', 'generating', 'observed'],
        'every state of the rollout machine',
      );
      const active = await chart.$$eval('g.state.active', (gs) =>
        gs.map((g) => g.getAttribute('data-state')),
      );
      t.same(
        active,
        [lastValue.get(sessionId)?.value],
        'the highlighted state is the last one the relay sent',
      );
      t.ok(
        await page.locator('a', { hasText: 'hosted Stately inspector' }).count(),
        'a link to the hosted inspector',
      );
      await page.screenshot({ path: join(shots, 'dashboard-actors.png') });
    },
  );

  await t.test('the experiments page says where reports go when there are none', async (t) => {
    await page.goto(`${dash.url}#/experiments`);
    const empty = await page.waitForSelector('[data-empty="experiments"]');
    t.match(await empty.textContent(), /holding report\.json/);

    // A report in the documented layout is drawn: its table and its plot.
    mkdirSync(join(work, 'experiments', 'sample'), { recursive: true });
    writeFileSync(
      join(work, 'experiments', 'sample', 'report.json'),
      JSON.stringify({
        title: 'sample report',
        tables: [
          {
            title: 'dev',
            columns: ['algo', 'EM'],
            rows: [
              ['grpo', 0.9],
              ['akbe', 0.95],
            ],
          },
        ],
        plots: [
          {
            title: 'EM',
            x: { label: 'step', values: [0, 1, 2] },
            series: [{ label: 'akbe', values: [0.9, 0.92, 0.95] }],
          },
        ],
      }),
    );
    await page.reload();
    const report = await page.waitForSelector('[data-experiment="sample"]');
    t.same(await report.$$eval('table.report tbody td', (tds) => tds.map((td) => td.textContent)), [
      'grpo',
      '0.9',
      'akbe',
      '0.95',
    ]);
    t.equal(await report.$eval('.chart', (c) => c.getAttribute('data-points')), '3');
    await page.screenshot({ path: join(shots, 'dashboard-experiments.png') });
  });

  t.same(consoleErrors.splice(0), [], 'no console errors on any page');

  await t.test('an open page survives a dashboard restart and a NATS restart, and says so', async (t) => {
    await page.goto(`${dash.url}#/run/${RUN}`);
    await page.waitForSelector('[data-link="live"]');
    const port = dash.port;
    await dash.close();
    await page.waitForSelector('[data-link="lost"]', { timeout: 15_000 });
    dash = await serve(port);
    await page.waitForSelector('[data-link="live"]', { timeout: 15_000 });
    t.match(await page.textContent('[data-link="live"]'), /dashboard reconnected 1×/);

    await nats.restart();
    // The outage may be too short to be drawn; the page counts it either way.
    await page.waitForSelector('[data-link="live"][data-nats-drops="1"]', { timeout: 30_000 });
    t.match(await page.textContent('[data-link="live"]'), /NATS back after 1 outage/);
    t.equal(await stepsShown(), STEPS, 'the run page still shows every step');
  });

  // While the dashboard or NATS is down the browser logs the failed loads of the page's own API
  // (the EventSource's refused reconnects, a stream cut or reset as the server goes away, a 503
  // while NATS is away); nothing else: a script error or any other message still fails.
  t.same(
    consoleErrors.filter((e) => !(/\/api\//.test(e) && /net::ERR_[A-Z_]+|status of 50[23]/.test(e))),
    [],
    'no other console errors across the restarts',
  );
});
