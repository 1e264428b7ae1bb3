/**
 * A run: per-step charts (live: each pushed learner.step adds its point), the config, the audit on
 * request, and the run's questions.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { withPoint } from '../../src/dashboard/points.js';
import { getJson, on } from './api.js';
import { Chart, type Series } from './chart.js';
import { fmt, html } from './html.js';
import { when } from './runs.js';
import type { AuditResult, RunSummary, RunView, StepPoint } from './types.js';

const CATEGORIES = ['tool-dependent', 'efficiency', 'hallucination', 'both-wrong'];
const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#4b5563'];

/** learner.step.extra keys of the oracle rates (src/rl/metrics.ts) and their legend labels. */
const ORACLE_RATES = [
  ['knownSearchRate', 'known: searched'],
  ['unknownNoSearchRate', 'unknown: no search'],
] as const;

function line(label: string, values: Array<number | null>, i: number): Series {
  return { label, values, color: COLORS[i % COLORS.length] };
}

/** Category counts drawn stacked: each band is the running sum, the legend shows the count. */
function stacked(points: StepPoint[]): Series[] {
  const sums = points.map(() => 0);
  const bands = CATEGORIES.map((c, i) => {
    const own = points.map((p) => p.categories[c] ?? 0);
    const top = own.map((v, k) => (sums[k] += v));
    return { label: c, values: top, shown: own, color: COLORS[i], fill: true };
  });
  return bands.reverse(); // widest first, so each narrower band is painted over it
}

type Value = (p: StepPoint) => number | null;

/** One line per [legend label, the point's value, colour index]. */
function lines(points: StepPoint[], specs: ReadonlyArray<readonly [string, Value, number]>): Series[] {
  return specs.map(([label, f, i]) => line(label, points.map(f), i));
}

/** A learner.step.extra value of each point (null where the step did not record it). */
function extra(k: string): Value {
  return (p) => p.extra[k] ?? null;
}

function charts(points: StepPoint[]) {
  const x = points.map((p) => p.step);
  const keys = new Set(points.flatMap((p) => Object.keys(p.extra)));
  const extraKeys = [...keys].filter((k) => k === 'trainReward' || k === 'formatFailures');
  // The world's oracle rates (learner.step.extra, recorded when the questions carry `known`).
  const oracle = ORACLE_RATES.filter(([k]) => keys.has(k));
  return [
    {
      id: 'chart-em',
      title: 'EM (with-tool) and no-tool EM',
      series: lines(points, [
        ['EM', (p) => p.em, 0],
        ['no-tool EM', (p) => p.noToolEm, 1],
      ]),
    },
    {
      id: 'chart-tc',
      title: 'TC (tool calls per question) and TP',
      series: lines(points, [
        ['TC', (p) => p.tc, 3],
        ['TP', (p) => p.tp, 4],
      ]),
    },
    { id: 'chart-categories', title: 'boundary categories (stacked)', series: stacked(points) },
    {
      id: 'chart-shifts',
      title: 'boundary shifts',
      series: lines(points, [['shifts', (p) => p.boundaryShifts, 2]]),
    },
    ...(oracle.length
      ? [
          {
            id: 'chart-known-search',
            title: 'known-search rate (world oracle): search on known, no search on unknown',
            series: lines(
              points,
              oracle.map(([k, label], i) => [label, extra(k), i === 0 ? 4 : 5] as const),
            ),
          },
        ]
      : []),
    {
      id: 'chart-loss',
      title: 'loss parts',
      series: lines(points, [
        ['loss', (p) => p.loss, 6],
        ['GRPO', (p) => p.lossGrpo, 0],
        ['λ·AKBE', (p) => p.lossAkbe, 1],
      ]),
    },
    {
      id: 'chart-speed',
      title: 'tokens / s',
      series: lines(points, [['tokens/s', (p) => p.tokensPerSecond, 5]]),
    },
    {
      id: 'chart-seconds',
      title: 'seconds per step',
      series: lines(points, [
        ['rollout s', (p) => p.rolloutSeconds, 0],
        ['train s', (p) => p.trainSeconds, 2],
      ]),
    },
    ...(extraKeys.length
      ? [
          {
            id: 'chart-extra',
            title: 'other recorded scalars',
            series: lines(
              points,
              extraKeys.map((k, i) => [k, extra(k), i] as const),
            ),
          },
        ]
      : []),
  ].map((c) => ({ ...c, x }));
}

function Audit({ runId }: { runId: string }) {
  const [state, setState] = useState<'idle' | 'running' | AuditResult | Error>('idle');
  const run = () => {
    setState('running');
    getJson<AuditResult>(`/api/runs/${runId}/audit`).then(setState, (e: Error) => setState(e));
  };
  let body = null;
  if (state === 'running')
    body = html`<p>recomputing rewards, labels, targets, advantages and metrics from the log…</p>`;
  else if (state instanceof Error) body = html`<p class="error">${state.message}</p>`;
  else if (state !== 'idle') {
    const r = state.report;
    body = html`<div class="audit" data-verdict=${state.verdict}>
      <p class=${state.verdict === 'clean' ? 'ok' : 'error'}>
        <b>${state.verdict === 'clean' ? 'clean' : `${r.mismatches.length} mismatches`}</b>
        (${Object.entries(r.checked)
          .map(([k, v]) => `${v} ${k}`)
          .join(', ')} recomputed)</p>
      ${
        r.mismatches.length > 0 &&
        html`<table><thead><tr><th>seq</th><th>event</th><th>step</th><th>question</th><th>rollout</th><th>field</th><th>recorded</th><th>recomputed</th></tr></thead>
      <tbody>${r.mismatches
        .slice(0, 200)
        .map(
          (m) =>
            html`<tr><td class="num">${m.seq}</td><td>${m.eventType}</td><td class="num">${m.step}</td><td>${m.questionId ?? ''}</td><td>${m.rolloutId ?? ''}</td><td>${m.field}</td><td>${JSON.stringify(m.recorded)}</td><td>${JSON.stringify(m.recomputed)}</td></tr>`,
        )}</tbody></table>`
      }
      ${r.notes.map((n) => html`<p class="note">note: ${n}</p>`)}
      <${VerifiedTraining} runId=${runId} record=${state.verifyTraining} />
    </div>`;
  }
  return html`<section><h2>Audit</h2>
    <button onClick=${run} disabled=${state === 'running'}>${state === 'idle' ? 'Run the audit (akbe replay)' : 'Run it again'}</button>${body}</section>`;
}

/**
 * The last `akbe replay --verify-training` verdict (docs/training.md): re-training costs the run's
 * training time, so the page shows the kept verdict and the command, and never starts one.
 */
function VerifiedTraining({ runId, record }: { runId: string; record: AuditResult['verifyTraining'] }) {
  const command = `akbe replay --run ${runId} --verify-training`;
  if (!record)
    return html`<p class="verify" data-verify="none">Training not verified: <code>${command}</code> re-trains every step from v0 and compares each published checkpoint.</p>`;
  const r = record.result;
  const when = `${record.at} (over ${record.events} events)`;
  if (r.ok)
    return html`<p class="verify ok" data-verify="ok"><b>training verified</b>: ${r.steps} steps re-derived from v0, every published checkpoint bit for bit, at ${when}.</p>`;
  const d = r.largest;
  return html`<div class="verify error" data-verify="mismatch">
    <p><b>training mismatch at step ${r.step}</b> (v${r.version}), after ${r.verified} verified steps, at ${when}:</p>
    <ul>${r.problems.map((p) => html`<li>${p}</li>`)}</ul>
    ${d && html`<p>largest parameter difference ${d.tensor}[${d.index}]: re-derived ${d.derived}, published ${d.published}</p>`}
    <p>Re-run: <code>${command}</code></p>
  </div>`;
}

interface QuestionRow {
  questionId: string;
  steps: number;
  category: string | null;
  shifts: number;
}

function Questions({ runId }: { runId: string }) {
  const [rows, setRows] = useState<QuestionRow[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (!rows)
    return html`<section><h2>Questions</h2>
      <button onClick=${() => getJson<QuestionRow[]>(`/api/runs/${runId}/questions`).then(setRows, (e: Error) => setError(e.message))}>List the run's questions</button>
      ${error && html`<p class="error">${error}</p>`}</section>`;
  return html`<section><h2>Questions</h2><table class="questions">
    <thead><tr><th>question</th><th>steps</th><th>latest category</th><th>shifts</th></tr></thead>
    <tbody>${rows.map(
      (q) =>
        html`<tr><td><a href=${`#/run/${runId}/question/${q.questionId}`}>${q.questionId}</a></td><td class="num">${q.steps}</td><td><span class=${`cat ${q.category}`}>${q.category ?? '–'}</span></td><td class="num">${q.shifts}</td></tr>`,
    )}</tbody></table></section>`;
}

export function RunPage({ runId }: { runId: string }) {
  const [view, setView] = useState<RunView | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      getJson<RunView | null>(`/api/runs/${runId}`).then(
        (v) => {
          setView(v);
          setError(v ? null : 'no events yet');
        },
        (e: Error) => setError(e.message),
      );
    load();
    const offRun = on('run', (d) => {
      const {
        runId: id,
        summary,
        point,
      } = d as { runId: string; summary: RunSummary | null; point?: StepPoint };
      if (id !== runId) return;
      setError(null);
      setView((v) => {
        if (!v) {
          void load(); // the run just started: read its config once
          return v;
        }
        return { ...v, summary: summary ?? v.summary, points: point ? withPoint(v.points, point) : v.points };
      });
    });
    const offResync = on('resync', load);
    return () => {
      offRun();
      offResync();
    };
  }, [runId]);
  const cs = useMemo(() => (view ? charts(view.points) : []), [view?.points]);
  if (error && !view)
    return html`<p class="empty" data-waiting=${runId}>Run ${runId} has no events yet (${error}); this page fills in when it starts.</p>`;
  if (!view) return html`<p>loading ${runId}…</p>`;
  const s = view.summary;
  return html`<div class="run" data-run=${runId}>
    <h1>${runId} <span class=${`status ${s.status}`}>${s.status}</span></h1>
    <p class="facts">${view.started?.algo ?? s.algo ?? '?'} · ${s.steps} steps started · policy v${s.policyVersion} ·
      EM ${fmt(s.latest?.em)} · TC ${fmt(s.latest?.tc, 2)} · TP ${fmt(s.latest?.tp)} · started ${when(s.startedAt)}${s.finishedAt ? ` · finished ${when(s.finishedAt)}` : ''}${s.reason ? ` · ${s.reason}` : ''}</p>
    <div class="charts" data-steps=${view.points.length}>${cs.map((c) => html`<${Chart} ...${c} />`)}</div>
    <${Questions} runId=${runId} />
    <${Audit} runId=${runId} />
    <section><h2>Config</h2>
      ${view.started ? html`<pre class="config">${JSON.stringify({ config: view.started.config, seeds: view.started.seeds, world: view.started.worldRef, policy: view.started.policyRef, akbe: view.started.akbeVersion }, null, 2)}</pre>` : html`<p>no run.started recorded</p>`}
    </section>
  </div>`;
}
