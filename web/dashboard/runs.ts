/** The runs table: every run, newest first, rows updated live from the pushes. */
import { useEffect, useState } from 'preact/hooks';
import { getJson, on } from './api.js';
import { fmt, html } from './html.js';
import type { RunSummary } from './types.js';

function upsert(runs: RunSummary[], s: RunSummary): RunSummary[] {
  const out = runs.filter((r) => r.runId !== s.runId);
  out.push(s);
  return out.sort(
    (a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0) || String(a.runId).localeCompare(String(b.runId)),
  );
}

export const when = (ms: number | null) => (ms ? new Date(ms).toLocaleString() : '–');

export function RunsPage() {
  const [runs, setRuns] = useState<RunSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      getJson<{ runs: RunSummary[] }>('/api/runs')
        .then((r) => {
          setRuns(r.runs);
          setError(null);
        })
        .catch((e: Error) => setError(e.message));
    load();
    const offRun = on('run', (d) => {
      const { summary } = d as { summary: RunSummary | null };
      if (summary) setRuns((rs) => upsert(rs ?? [], summary));
    });
    const offResync = on('resync', load);
    return () => {
      offRun();
      offResync();
    };
  }, []);
  if (error) return html`<p class="error">${error}</p>`;
  if (!runs) return html`<p>loading runs…</p>`;
  if (runs.length === 0)
    return html`<p class="empty">No runs in the event store yet. Start one with <code>akbe train --config configs/tiny.yaml</code>; it appears here as it starts.</p>`;
  return html`<table class="runs">
    <thead><tr><th>run</th><th>status</th><th>algorithm</th><th>steps</th><th>policy</th><th>EM</th><th>TC</th><th>TP</th><th>started</th></tr></thead>
    <tbody>${runs.map(
      (r) => html`<tr data-run=${r.runId}>
        <td><a href=${`#/run/${r.runId}`}>${r.runId}</a></td>
        <td><span class=${`status ${r.status}`}>${r.status}</span></td>
        <td>${r.algo ?? '–'}</td>
        <td class="num">${r.steps}</td>
        <td class="num">v${r.policyVersion}</td>
        <td class="num">${fmt(r.latest?.em)}</td>
        <td class="num">${fmt(r.latest?.tc, 2)}</td>
        <td class="num">${fmt(r.latest?.tp)}</td>
        <td>${when(r.startedAt)}</td>
      </tr>`,
    )}</tbody>
  </table>`;
}
