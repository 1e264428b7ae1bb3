/**
 * Actors: the live actor tree of running runs (from the inspector relay, through the dashboard),
 * and for the picked actor its statechart with its current state, its status and recent events.
 * With no relay data the machines of src/machines are drawn from their definitions alone.
 */
import { useEffect, useState } from 'preact/hooks';
import type { ActorInfo, ActorsDelta } from '../../src/dashboard/actors-feed.js';
import { getJson, on } from './api.js';
import { html } from './html.js';
import { Statechart } from './statechart.js';

const SHOWN_CHILDREN = 60;

const stateText = (v: unknown): string =>
  typeof v === 'string' ? v : v && typeof v === 'object' ? JSON.stringify(v) : '';

/** The hosted Stately inspector, fed by the same relay (its bridge page). */
const bridgeUrl = (ws: string) => ws.replace(/^ws/, 'http');

function Tree({ actors, selected }: { actors: Map<string, ActorInfo>; selected: string | null }) {
  // A rollout machine in a worker process is a root actor there: hang it under the question's
  // dispatch of that rollout (the actor named by its rollout id).
  const byName = new Map<string, string>();
  for (const a of actors.values()) if (!a.definition) byName.set(a.name, a.sessionId);
  const children = new Map<string | null, ActorInfo[]>();
  for (const a of actors.values()) {
    const adopted = !a.parentId && a.key ? (byName.get(a.key) ?? null) : null;
    const parent = a.parentId && actors.has(a.parentId) ? a.parentId : adopted;
    const list = children.get(parent) ?? [];
    list.push(a);
    children.set(parent, list);
  }
  const node = (a: ActorInfo): unknown => {
    const kids = children.get(a.sessionId) ?? [];
    return html`<li>
      <a href=${`#/actors/${encodeURIComponent(a.sessionId)}`} class=${`actor ${a.status}${a.sessionId === selected ? ' selected' : ''}`} data-actor=${a.name} data-machine=${a.machine} data-session=${a.sessionId}>
        ${a.name}${a.key && a.key !== a.name ? ` ${a.key}` : ''}</a> <span class="value">${stateText(a.value)}</span>
      ${kids.length > 0 && html`<ul>${kids.slice(0, SHOWN_CHILDREN).map(node)}${kids.length > SHOWN_CHILDREN ? html`<li class="note">… ${kids.length - SHOWN_CHILDREN} more</li>` : ''}</ul>`}
    </li>`;
  };
  return html`<ul class="tree">${(children.get(null) ?? []).map(node)}</ul>`;
}

function Machines() {
  const [defs, setDefs] = useState<Record<string, unknown> | null>(null);
  const [pick, setPick] = useState('rollout');
  useEffect(() => void getJson<Record<string, unknown>>('/api/machines').then(setDefs), []);
  if (!defs) return null;
  return html`<section><h2>The machines (from their definitions)</h2>
    <p>${Object.keys(defs).map((k) => html`<button class=${k === pick ? 'on' : ''} onClick=${() => setPick(k)}>${k}</button> `)}</p>
    <${Statechart} definition=${defs[pick]} value=${null} /></section>`;
}

export function ActorsPage({ selected }: { selected: string | null }) {
  const [actors, setActors] = useState<Map<string, ActorInfo>>(new Map());
  const [defs, setDefs] = useState<Record<string, unknown>>({});
  const [relays, setRelays] = useState<ActorsDelta['relays']>([]);
  useEffect(() => {
    const apply = (d: ActorsDelta, replace: boolean) => {
      setRelays(d.relays);
      setDefs((old) => ({ ...(replace ? {} : old), ...d.definitions }));
      setActors((old) => {
        const next = new Map(replace ? [] : old);
        for (const a of d.actors) next.set(a.sessionId, a);
        return next;
      });
    };
    const load = () => getJson<ActorsDelta>('/api/actors').then((d) => apply(d, true));
    void load();
    const off = on('actors', (d) => apply(d as ActorsDelta, false));
    const offResync = on('resync', load);
    return () => {
      off();
      offResync();
    };
  }, []);
  const actor = selected ? actors.get(selected) : undefined;
  const relayLine = relays.length
    ? relays.map(
        (
          r,
        ) => html`<span class=${r.connected ? 'ok' : 'bad'}>relay ${r.url}: ${r.connected ? 'connected' : 'not reachable (retrying)'}</span>
          · <a href=${bridgeUrl(r.url)} target="_blank" rel="noopener">open in the hosted Stately inspector</a> `,
      )
    : html`<span>no inspector relay configured (akbe dashboard --inspect ws://HOST:PORT)</span>`;
  return html`<div class="actors">
    <p class="facts">${relayLine}</p>
    ${
      actors.size === 0
        ? html`<p class="empty">No live actors. Start a run with <code>akbe train --inspect</code> (relay on port 8080, which the dashboard reads by default) or re-play one with <code>akbe replay --run ID --inspect</code>.</p><${Machines} />`
        : html`<div class="split">
          <nav><${Tree} actors=${actors} selected=${selected} /></nav>
          <main>${
            actor
              ? html`<h2>${actor.name}${actor.key && actor.key !== actor.name ? ` ${actor.key}` : ''} <span class=${`status ${actor.status}`}>${actor.status}</span></h2>
                <p class="facts">state <b class="current-state">${stateText(actor.value)}</b> · session ${actor.sessionId}</p>
                ${
                  actor.definition && defs[actor.definition]
                    ? html`<${Statechart} definition=${defs[actor.definition]} value=${actor.value} />`
                    : html`<p class="note">a promise actor (a service call): no statechart</p>`
                }
                <h3>Recent events</h3>
                <ol class="events">${actor.events.map((e) => html`<li><code>${e.type}</code> <span class="note">${new Date(e.at).toLocaleTimeString()}</span></li>`)}</ol>`
              : html`<p>Pick an actor to see its statechart and current state.</p>`
          }</main>
        </div>`
    }
  </div>`;
}
