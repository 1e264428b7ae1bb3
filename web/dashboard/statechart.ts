/**
 * A machine's statechart from its definition (an xstate config as JSON: the relay's
 * `@xstate.actor.definition`, or /api/machines), laid out by elkjs (the Eclipse Layout Kernel's
 * layered algorithm, which handles nested states and routes edges around them) and drawn as SVG,
 * the states the actor is in highlighted.
 */
import ELK from 'elkjs/lib/elk.bundled.js';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api';
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { activePaths, flatten, invokes, type StateDef } from './statechart-graph.js';

const CHAR_W = 6.5;

function elkGraph(def: StateDef): ElkNode {
  const { states, transitions } = flatten(def);
  const node = (path: string): ElkNode => {
    const s = states.get(path)!;
    const name = path.split('.').pop()!;
    const kids = Object.keys(s.states ?? {}).map((k) => node(`${path}.${k}`));
    const sub = invokes(s).map((src) => `invoke ${src}`);
    const width = Math.max(70, ...[name, ...sub].map((t) => t.length * CHAR_W + 24));
    return kids.length
      ? {
          id: path,
          labels: [{ text: name, width: name.length * CHAR_W, height: 14 }],
          children: kids,
          layoutOptions: { 'elk.padding': '[top=28,left=12,bottom=12,right=12]' },
        }
      : { id: path, width, height: 30 + sub.length * 14 };
  };
  const edges: ElkExtendedEdge[] = transitions.map((t, i) => ({
    id: `e${i}`,
    sources: [t.from],
    targets: [t.to],
    labels: [{ text: t.label, width: t.label.length * CHAR_W, height: 14 }],
  }));
  return {
    id: '__root',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.layered.spacing.nodeNodeBetweenLayers': '40',
      'elk.spacing.edgeLabel': '4',
      'elk.json.edgeCoords': 'ROOT',
      'elk.json.shapeCoords': 'ROOT',
    },
    children: Object.keys(def.states ?? {}).map((k) => node(k)),
    edges,
  };
}

const elk = new ELK();

export function Statechart({ definition, value }: { definition: unknown; value: unknown }) {
  const [laid, setLaid] = useState<ElkNode | null>(null);
  const [error, setError] = useState<string | null>(null);
  const def = definition as StateDef;
  useEffect(() => {
    setLaid(null);
    elk.layout(elkGraph(def)).then(setLaid, (e: Error) => setError(e.message));
  }, [definition]);
  if (error) return html`<p class="error">layout failed: ${error}</p>`;
  if (!laid) return html`<p>laying out ${def.id ?? 'machine'}…</p>`;
  const { states } = flatten(def);
  const active = new Set(activePaths(value));
  const initialOf = (path: string) => {
    const parent = path.includes('.') ? states.get(path.slice(0, path.lastIndexOf('.'))) : def;
    return parent?.initial === path.split('.').pop();
  };
  const nodes: ElkNode[] = [];
  const collect = (n: ElkNode) => {
    for (const c of n.children ?? []) {
      nodes.push(c);
      collect(c);
    }
  };
  collect(laid);
  return html`<svg class="statechart" data-machine=${def.id} width=${(laid.width ?? 0) + 8} height=${(laid.height ?? 0) + 8} viewBox=${`-4 -4 ${(laid.width ?? 0) + 8} ${(laid.height ?? 0) + 8}`}>
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#64748b" /></marker></defs>
    ${nodes.map((n) => {
      const s = states.get(n.id)!;
      const name = n.id.split('.').pop();
      const cls = `state${active.has(n.id) ? ' active' : ''}${s.type === 'final' ? ' final' : ''}${initialOf(n.id) ? ' initial' : ''}${n.children?.length ? ' compound' : ''}`;
      return html`<g class=${cls} data-state=${n.id}>
        <rect x=${n.x} y=${n.y} width=${n.width} height=${n.height} rx="6" />
        <text x=${(n.x ?? 0) + 10} y=${(n.y ?? 0) + 18} class="name">${initialOf(n.id) ? '▸ ' : ''}${name}</text>
        ${invokes(s).map((src, i) => html`<text x=${(n.x ?? 0) + 10} y=${(n.y ?? 0) + 32 + i * 14} class="invoke">invoke ${src}</text>`)}
      </g>`;
    })}
    ${(laid.edges ?? []).map((e) =>
      (e.sections ?? []).map((sec) => {
        const pts = [sec.startPoint, ...(sec.bendPoints ?? []), sec.endPoint];
        const label = e.labels?.[0];
        return html`<g class="edge"><path d=${`M ${pts.map((p) => `${p.x} ${p.y}`).join(' L ')}`} marker-end="url(#arrow)" />
          ${label && html`<text x=${label.x} y=${(label.y ?? 0) + 11}>${label.text}</text>`}</g>`;
      }),
    )}
  </svg>`;
}
