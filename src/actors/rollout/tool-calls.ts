/**
 * Tool calls over NATS: the `ServiceCall` a tool (src/tools) sends its request through, as JSON
 * request/reply on `akbe.<run>.svc.<service>`, and the rollout machine's `callTool` actor built
 * from the run's tools and an environment's text conventions.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { fromPromise } from 'xstate';
import { SERVICES, type ServiceName, serviceSubject } from '../../events/subjects.js';
import type { ToolRequest, ToolResult } from '../../machines/rollout.js';
import { toolForTag } from '../../tools/registry.js';
import { type AnyTool, type ServiceCall, ToolReplyError } from '../../tools/tool.js';
import { abortable } from '../../util/abortable.js';
import { requestResending, SERVICE_START_WAIT_MS } from '../nats/resend-request.js';

/**
 * JSON request/reply to the run's services; an abort rejects at once (the reply is then dropped).
 * A service that is still starting (or restarting) is waited for (`waitForResponderMs`), so a
 * rollout does not spend a delivery attempt on "no responders".
 */
export function natsServiceCall(
  nc: NatsConnection,
  runId: string,
  timeoutMs = 30_000,
  waitForResponderMs = SERVICE_START_WAIT_MS,
): ServiceCall {
  return async (service, body, signal) => {
    if (!(SERVICES as readonly string[]).includes(service))
      throw new ToolReplyError(
        service,
        `no service '${service}': add it to SERVICES in src/events/subjects.ts`,
      );
    signal?.throwIfAborted();
    const subject = serviceSubject(runId, service as ServiceName);
    const reply = await abortable(
      requestResending(nc, subject, JSON.stringify(body), timeoutMs, { waitForResponderMs, signal }),
      signal,
    );
    try {
      return JSON.parse(reply.string()) as unknown;
    } catch (err) {
      throw new ToolReplyError(service, `${subject}: reply is not valid JSON`, { cause: err });
    }
  };
}

/**
 * An environment's text conventions: a tool's observation text -> the inserted segment's text and
 * the token ids the trajectory keeps (token-in/token-out), e.g. the world's `<information>` block.
 */
export interface ObservationCodec {
  insert(observation: string): { text: string; tokens: number[] };
  /** Character budget of one observation (default: the tool's own). */
  maxChars?: number;
}

/** The rollout machine's `callTool` actor: the tool answering the tag, called through `service`. */
export function toolCallActor(tools: readonly AnyTool[], service: ServiceCall, env: ObservationCodec) {
  return fromPromise<ToolResult, ToolRequest>(async ({ input, signal }) => {
    const tool = toolForTag(tools, input.tag);
    const t0 = performance.now();
    const args = tool.parse(input.query);
    // The grammar already refused an empty call; a tool may still refuse its arguments: say so.
    const reply = args === null ? null : await tool.call(args, service, signal);
    const observation =
      reply === null ? `invalid ${tool.name} arguments` : tool.observe(reply, { maxChars: env.maxChars });
    const { text, tokens } = env.insert(observation);
    return {
      tool: tool.name,
      tokens,
      text,
      record: reply === null ? {} : tool.record(reply),
      latencyMs: performance.now() - t0,
      error: reply === null ? `${tool.name} could not parse ${JSON.stringify(input.query)}` : null,
    };
  });
}
