/**
 * `akbe/tools`: the tool interface and registry. A tool registered here (`registerTool`) can be
 * named in a run's `tools:` list; docs/DESIGN.md's "How to add a tool" lists the rest it needs.
 */

export { DEFAULT_TOOLS, registerTool, type ToolFactory, toolForTag, toolsNamed } from './registry.js';
export { type SearchArgs, type SearchToolHit, type SearchToolOptions, searchTool } from './search.js';
export type { AnyTool, ObserveOptions, ServiceCall, Tool } from './tool.js';
