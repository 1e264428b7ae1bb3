/**
 * A statechart's states and transitions from its definition (an xstate machine config as JSON):
 * state paths, resolved transition targets with their labels, and the paths a snapshot value
 * stands for. Pure and import-free, so the page and the tests share it.
 */
export interface StateDef {
  id?: string;
  initial?: string;
  type?: string;
  states?: Record<string, StateDef>;
  on?: Record<string, unknown>;
  always?: unknown;
  after?: Record<string, unknown>;
  invoke?: unknown;
}

interface Transition {
  from: string;
  to: string;
  label: string;
}

const asArray = <T>(x: T | T[] | undefined): T[] => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

function targetsOf(t: unknown): Array<{ target: string; guard?: string }> {
  return asArray(t as unknown[]).flatMap((x) => {
    if (typeof x === 'string') return [{ target: x }];
    if (x && typeof x === 'object') {
      const o = x as { target?: unknown; guard?: unknown };
      const guard = typeof o.guard === 'string' ? o.guard : (o.guard as { type?: string } | undefined)?.type;
      return asArray(o.target as string | string[]).map((target) => ({ target, guard }));
    }
    return [];
  });
}

/** Resolves an xstate target ('sibling', '.child', '#id.a.b') from the state at `path` to a path. */
function resolveTarget(
  target: string,
  path: string[],
  byId: Map<string, string>,
  root: string,
): string | null {
  if (target.startsWith('#')) {
    const [id, ...rest] = target.slice(1).split('.');
    if (id === root) return rest.join('.') || null;
    const base = byId.get(id);
    return base === undefined ? null : [base, ...rest].join('.');
  }
  if (target.startsWith('.')) return [...path, ...target.slice(1).split('.')].join('.');
  return [...path.slice(0, -1), ...target.split('.')].join('.');
}

/** Every state path and transition of a definition. */
export function flatten(def: StateDef): {
  states: Map<string, StateDef>;
  transitions: Transition[];
  root: string;
} {
  const root = def.id ?? 'machine';
  const states = new Map<string, StateDef>();
  const byId = new Map<string, string>();
  const walk = (s: StateDef, path: string[]) => {
    for (const [name, child] of Object.entries(s.states ?? {})) {
      const p = [...path, name];
      states.set(p.join('.'), child);
      if (child.id) byId.set(child.id, p.join('.'));
      walk(child, p);
    }
  };
  walk(def, []);
  const transitions: Transition[] = [];
  for (const [key, s] of states) {
    const path = key.split('.');
    const add = (t: unknown, label: (guard?: string) => string) => {
      for (const { target, guard } of targetsOf(t)) {
        const to = resolveTarget(target, path, byId, root);
        if (to && states.has(to)) transitions.push({ from: key, to, label: label(guard) });
      }
    };
    for (const [event, t] of Object.entries(s.on ?? {})) add(t, (g) => (g ? `${event} [${g}]` : event));
    add(s.always, (g) => (g ? `[${g}]` : 'always'));
    for (const [delay, t] of Object.entries(s.after ?? {})) add(t, () => `after ${delay}`);
    for (const inv of asArray(s.invoke as Array<{ src?: unknown; onDone?: unknown; onError?: unknown }>)) {
      const src = typeof inv?.src === 'string' ? inv.src : 'invoked';
      add(inv?.onDone, (g) => `done: ${src}${g ? ` [${g}]` : ''}`);
      add(inv?.onError, () => `error: ${src}`);
    }
  }
  return { states, transitions, root };
}

/** The state paths a snapshot value stands for: 'a' → [a]; {a: 'b'} → [a, a.b]. */
export function activePaths(value: unknown, prefix: string[] = []): string[] {
  if (typeof value === 'string') return [[...prefix, value].join('.')];
  if (value && typeof value === 'object')
    return Object.entries(value).flatMap(([k, v]) => [
      [...prefix, k].join('.'),
      ...activePaths(v, [...prefix, k]),
    ]);
  return [];
}

export function invokes(s: StateDef): string[] {
  return asArray(s.invoke as Array<{ src?: unknown }>).flatMap((i) =>
    typeof i?.src === 'string' ? [i.src] : [],
  );
}
