/**
 * What the orchestrator and a rollout worker say to each other: one command per rollout on the
 * run's work queue (stream COMMAND_STREAM, subject akbe.<run>.cmd.rollout), pulled through one
 * durable consumer per run. The worker validates each command at its edge (rollout-command.ts).
 */
import type { RolloutInput } from '../../machines/rollout.js';

export interface RolloutCommand {
  runId: string;
  /** The rollout's step rides in its input (one type from the question machine to the worker). */
  input: RolloutInput;
}

/** The run's durable pull consumer on the command stream. */
export function rolloutConsumerName(runId: string): string {
  return `rollout-${runId}`;
}
