/**
 * A question: its boundary history across the run's steps, then each step's rollouts as
 * transcripts (think / search / information / answer), the boundary target y* marked.
 */
import { useEffect, useState } from 'preact/hooks';
import type { QuestionView, RolloutTranscript } from '../../src/dashboard/question-view.js';
import { getJson, on } from './api.js';
import { html } from './html.js';

function Rollout({ r }: { r: RolloutTranscript }) {
  const ok = r.reward === 1;
  return html`<article class=${`rollout ${r.path}${r.target ? ' target' : ''}`} data-rollout-id=${r.rolloutId}>
    <header>
      <b>${r.path === 'with-tool' ? 'with tool' : 'no tool'} #${r.index}</b>
      <span class=${ok ? 'ok' : 'bad'}>${ok ? '✓ EM 1' : '✗ EM 0'}</span>
      <span>reward ${r.reward}</span><span>${r.toolCalls} calls</span><span>${r.stopReason}</span>
      ${!r.formatOk && html`<span class="bad">format ✗</span>`}
      ${r.target && html`<span class="badge">target y*</span>`}
      <span class="seq">seq ${r.seq}</span>
    </header>
    ${
      r.blocks
        ? html`<div class="blocks">${r.blocks.map((b) => html`<div class=${`block ${b.kind}`}><span class="tag">${b.kind}</span>${b.text}</div>`)}</div>`
        : html`<p class="note">turn texts not recorded for this rollout (answer: ${r.answer ?? 'none'})</p>`
    }
  </article>`;
}

export function QuestionPage({ runId, questionId }: { runId: string; questionId: string }) {
  const [view, setView] = useState<QuestionView | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      getJson<QuestionView>(`/api/runs/${runId}/questions/${questionId}`).then(setView, (e: Error) =>
        setError(e.message),
      );
    load();
    return on('resync', load);
  }, [runId, questionId]);
  if (error) return html`<p class="error">${error}</p>`;
  if (!view) return html`<p>reading run ${runId}…</p>`;
  return html`<div class="question" data-question=${questionId}>
    <p class="crumbs"><a href=${`#/run/${runId}`}>${runId}</a> / ${questionId}</p>
    <h1>${view.text ?? questionId}</h1>
    <p class="facts">gold: ${view.goldAnswers.map((g) => html`<code>${g}</code> `)} · split ${view.split ?? '?'}</p>
    <h2>Boundary history</h2>
    <table class="history"><thead><tr><th>step</th><th>version</th><th>category</th><th>previous</th><th>shift</th><th>WT correct</th><th>NT correct</th><th>calls</th><th>target</th><th>seq</th></tr></thead>
    <tbody>${view.history.map(
      (
        h,
      ) => html`<tr><td class="num">${h.step}</td><td class="num">v${h.policyVersion}</td><td><span class=${`cat ${h.category}`}>${h.category ?? '–'}</span></td><td>${h.previousCategory ?? '–'}</td><td>${h.shifted ? '⇄' : ''}</td>
        <td class="num">${h.withTool.correct}/${h.withTool.total}</td><td class="num">${h.noTool.correct}/${h.noTool.total}</td><td class="num">${h.withTool.toolCalls}</td><td>${h.targetRolloutId ?? '–'}</td><td class="num">${h.seq}</td></tr>`,
    )}</tbody></table>
    ${view.steps.map(
      (s) => html`<section class="qstep" data-step=${s.step}>
        <h2>step ${s.step} · v${s.policyVersion} · <span class=${`cat ${s.category}`}>${s.category ?? 'unlabelled'}</span>${s.targetRolloutId ? ` · target ${s.targetRolloutId}` : ' · no target'}</h2>
        <div class="rollouts">${s.rollouts.map((r) => html`<${Rollout} r=${r} />`)}</div>
      </section>`,
    )}
  </div>`;
}
