/** Experiments: the tables and plots `akbe experiment report` writes, one section per spec. */
import { useEffect, useState } from 'preact/hooks';
import type { Experiment } from '../../src/dashboard/experiments.js';
import { getJson } from './api.js';
import { Chart } from './chart.js';
import { html } from './html.js';

const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2'];

export function ExperimentsPage() {
  const [data, setData] = useState<{ dir: string; experiments: Experiment[] } | null>(null);
  useEffect(
    () => void getJson<{ dir: string; experiments: Experiment[] }>('/api/experiments').then(setData),
    [],
  );
  if (!data) return html`<p>loading…</p>`;
  if (data.experiments.length === 0)
    return html`<div class="empty" data-empty="experiments"><p>No experiment reports in <code>${data.dir}</code>.</p>
      <p><code>akbe experiment report</code> (planned) writes one folder per experiment spec
      there, holding <code>report.json</code>: <code>{"title", "tables": [{"title", "columns", "rows"}], "plots": [{"title", "x": {"label", "values"}, "series": [{"label", "values"}]}]}</code>.
      This page shows each one's tables and plots (docs/dashboard.md).</p></div>`;
  return html`<div>${data.experiments.map(
    (e) => html`<section class="experiment" data-experiment=${e.name}><h2>${e.title}</h2>
      ${e.error && html`<p class="error">${e.error}</p>`}
      ${e.tables.map(
        (
          t,
        ) => html`<h3>${t.title}</h3><table class="report"><thead><tr>${t.columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
          <tbody>${t.rows.map((r) => html`<tr>${r.map((c) => html`<td class=${typeof c === 'number' ? 'num' : ''}>${c ?? '–'}</td>`)}</tr>`)}</tbody></table>`,
      )}
      <div class="charts">${e.plots.map(
        (p) =>
          html`<${Chart} title=${p.title} x=${p.x.values} xLabel=${p.x.label} series=${p.series.map((s, i) => ({ label: s.label, values: s.values, color: COLORS[i % COLORS.length] }))} />`,
      )}</div></section>`,
  )}</div>`;
}
