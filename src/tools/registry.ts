/**
 * Tools by name. A run's config names its tools (`tools: ['search']`); the wiring looks them up
 * here, and the rollout machine is given their tags. A duplicate name or tag throws; a failed
 * lookup lists the registered names.
 */
import { searchTool } from './search.js';
import type { AnyTool } from './tool.js';

export class UnknownToolError extends Error {
  constructor(
    readonly tool: string,
    readonly known: readonly string[],
  ) {
    super(`unknown tool '${tool}'; registered tools: ${known.join(', ')}`);
    this.name = 'UnknownToolError';
  }
}

export class DuplicateToolError extends Error {
  constructor(readonly what: string) {
    super(`a tool is already registered with ${what}`);
    this.name = 'DuplicateToolError';
  }
}

/** Makes a tool from the run's settings (e.g. search's top-k). */
export type ToolFactory = (settings: { topK?: number }) => AnyTool;

const FACTORIES = new Map<string, ToolFactory>();

/** Registers a tool factory under `name`; a run's `tools:` list names it (throws on a duplicate). */
export function registerTool(name: string, factory: ToolFactory): void {
  const prev = FACTORIES.get(name);
  if (prev && prev !== factory) throw new DuplicateToolError(`the name '${name}'`);
  FACTORIES.set(name, factory);
}

registerTool('search', (s) => searchTool({ topK: s.topK }));

/** The tools a run uses when its config names none: the paper's one tool. */
export const DEFAULT_TOOLS = ['search'] as const;

/** The named tools, made with the run's settings; their tags must differ. */
export function toolsNamed(names: readonly string[], settings: { topK?: number } = {}): AnyTool[] {
  const tools = names.map((name) => {
    const make = FACTORIES.get(name);
    if (!make) throw new UnknownToolError(name, [...FACTORIES.keys()]);
    return make(settings);
  });
  const tags = new Set<string>();
  for (const t of tools) {
    if (tags.has(t.tag)) throw new DuplicateToolError(`the tag <${t.tag}>`);
    tags.add(t.tag);
  }
  return tools;
}

/** The tool answering `tag`. */
export function toolForTag(tools: readonly AnyTool[], tag: string): AnyTool {
  const tool = tools.find((t) => t.tag === tag);
  if (!tool)
    throw new UnknownToolError(
      `<${tag}>`,
      tools.map((t) => `<${t.tag}>`),
    );
  return tool;
}
