/**
 * The dashboard page: a hash router over five views (runs, run, question, actors, experiments)
 * under one banner that says whether what is shown is live.
 */
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ActorsPage } from './actors.js';
import { connectEvents, type LinkState, link, linkBanner, on } from './api.js';
import { ExperimentsPage } from './experiments.js';
import { html } from './html.js';
import { QuestionPage } from './question.js';
import { RunPage } from './run.js';
import { RunsPage } from './runs.js';

function route(hash: string) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'run' && parts[1] && parts[2] === 'question' && parts[3])
    return { tab: 'runs', view: html`<${QuestionPage} runId=${parts[1]} questionId=${parts[3]} />` };
  if (parts[0] === 'run' && parts[1]) return { tab: 'runs', view: html`<${RunPage} runId=${parts[1]} />` };
  if (parts[0] === 'actors')
    return { tab: 'actors', view: html`<${ActorsPage} selected=${parts[1] ?? null} />` };
  if (parts[0] === 'experiments') return { tab: 'experiments', view: html`<${ExperimentsPage} />` };
  return { tab: 'runs', view: html`<${RunsPage} />` };
}

function App() {
  const [hash, setHash] = useState(location.hash);
  const [state, setState] = useState<LinkState>(link);
  useEffect(() => {
    const onHash = () => setHash(location.hash);
    window.addEventListener('hashchange', onHash);
    const off = on('link', (l) => setState(l as LinkState));
    return () => {
      window.removeEventListener('hashchange', onHash);
      off();
    };
  }, []);
  const { tab, view } = route(hash);
  const tabLink = (name: string, href: string) =>
    html`<a href=${href} class=${tab === name ? 'on' : ''}>${name}</a>`;
  return html`<header class="top"><b>akbe</b>
      <nav>${tabLink('runs', '#/')}${tabLink('actors', '#/actors')}${tabLink('experiments', '#/experiments')}</nav>
      ${linkBanner(state)}</header>
    <main class="page">${view}</main>`;
}

connectEvents();
const root = document.getElementById('app')!;
root.textContent = ''; // the "loading…" shown until the bundle runs
render(html`<${App} />`, root);
