/**
 * A tool the policy can call from its response: `<tag> argument text </tag>`, answered by the
 * environment with an observation block. Everything tool-specific lives behind this interface:
 *
 *   name      what events and configs call it ('search')
 *   tag       the tag it answers (the grammar in src/rl/format.ts knows tools only by their tags)
 *   parse     the argument text -> typed arguments (null: not a valid call)
 *   call      one request to the tool's service, through a `ServiceCall` the wiring supplies
 *             (NATS request/reply in src/actors), so a tool never opens a connection itself
 *   observe   the reply -> observation text, cut to `maxChars` (characters bound tokens from above
 *             for any tokenizer; the environment wraps and tokenizes it)
 *   record    the reply -> what `tool.called` records beside the query (JSON)
 *
 * Tools are pure values; register them by name in src/tools/registry.ts.
 */
import type { Json } from '../util/json.js';

/** One request to a named service (`akbe.<run>.svc.<service>`), JSON in, JSON out. */
export type ServiceCall = (service: string, body: Json, signal?: AbortSignal) => Promise<unknown>;

/** Limits on the observation text a tool renders. */
export interface ObserveOptions {
  /** Upper bound on the observation's length in characters. */
  maxChars?: number;
}

/** A tool the policy can call by its tag: name, tag, the service it calls, parse, call, observe and record (pure; I/O goes through the ServiceCall). */
export interface Tool<Args = unknown, Reply = unknown> {
  readonly name: string;
  /** The tag the policy writes around a call: `<tag> … </tag>`. One tag per tool. */
  readonly tag: string;
  /** The service `call` sends to (`svc.<service>`); roles start one per tool. */
  readonly service: string;
  /** Typed arguments from the text between the tags; null when the text is not a valid call. */
  parse(text: string): Args | null;
  /** Runs the call; throws ToolReplyError when the service's reply breaks the tool's contract. */
  call(args: Args, service: ServiceCall, signal?: AbortSignal): Promise<Reply>;
  /** The observation text of a reply (without the environment's `<information>` wrapper). */
  observe(reply: Reply, opts?: ObserveOptions): string;
  /** What `tool.called` records of the reply, beside the query and the observation's tokens. */
  record(reply: Reply): { [key: string]: Json };
}

/** Any tool, whatever its argument and reply types (the registry and the wiring hold these). */
// biome-ignore lint/suspicious/noExplicitAny: a tool's own code is typed; holders only pass values through
export type AnyTool = Tool<any, any>;

/** A service answered something the tool cannot read (or answered `{error}`). */
export class ToolReplyError extends Error {
  constructor(
    readonly tool: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`tool ${tool}: ${message}`, options);
    this.name = 'ToolReplyError';
  }
}
