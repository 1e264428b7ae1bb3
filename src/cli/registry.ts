/**
 * Every command the `akbe` CLI knows. Each area keeps its commands in `src/cli/commands/<area>.ts`
 * and imports heavy modules (onnxruntime, hnswlib, NATS) lazily inside `run`, so that `--help`
 * and unrelated commands start fast.
 */
import type { CommandSpec } from './command.js';
import { demoCommands } from './commands/demo.js';
import { eventsCommands } from './commands/events.js';
import { indexCommands } from './commands/index.js';
import { natsCommands } from './commands/nats.js';
import { policyCommands } from './commands/policy.js';
import { replayCommands } from './commands/replay.js';
import { runsCommands } from './commands/runs.js';
import { trainCommands } from './commands/train.js';
import { workerCommands } from './commands/worker.js';
import { worldCommands } from './commands/world.js';

export const COMMANDS: CommandSpec[] = [
  ...natsCommands,
  ...eventsCommands,
  ...demoCommands,
  ...indexCommands,
  ...worldCommands,
  ...policyCommands,
  ...trainCommands,
  ...workerCommands,
  ...replayCommands,
  ...runsCommands,
];
