/**
 * Every command the `akbe` CLI knows. Each area keeps its commands in `src/cli/commands/<area>.ts`
 * and imports what a command runs (NATS, the orchestrator, onnxruntime, hnswlib, esbuild) inside
 * its `run`, with dynamic imports: this table imports every command file, so a static import
 * there would load all of them for every command (the orchestrator alone takes ~0.4 s to load,
 * NATS ~0.2 s, on a loaded 2-core machine), and `akbe --help`, `akbe nats status` and the docs
 * test's many short commands would pay for all of it. Modules loaded only by such a run import
 * statically (train-job.ts).
 */
import type { CommandSpec } from './command.js';
import { dashboardCommands } from './commands/dashboard.js';
import { demoCommands } from './commands/demo.js';
import { eventsCommands } from './commands/events.js';
import { experimentCommands } from './commands/experiment.js';
import { indexCommands } from './commands/index.js';
import { natsCommands } from './commands/nats.js';
import { policyCommands } from './commands/policy.js';
import { policyServeCommands } from './commands/policy-serve.js';
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
  ...policyServeCommands,
  ...trainCommands,
  ...experimentCommands,
  ...workerCommands,
  ...replayCommands,
  ...runsCommands,
  ...dashboardCommands,
];
