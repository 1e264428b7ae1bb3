/** What `runTraining` (orchestrator.ts) takes and returns, shared by its phases. */
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { InspectionEvent } from 'xstate';
import type { EventStore } from '../../events/store.js';
import type { AkbeFact } from '../../machines/facts.js';
import type { Json } from '../../util/json.js';
import type { EngineOptions, Role, RunSpec } from '../roles/roles.js';
import type { DispatchOptions } from './dispatch.js';
import type { StepReport } from './step-report.js';

export interface TrainingOptions {
  nc: NatsConnection;
  js: JetStreamClient;
  store: EventStore;
  runId: string;
  spec: RunSpec;
  /** Directory of this run's files (checkpoints/v<k>). */
  runDir: string;
  /** Roles to run in this process (default all: the embedded single-process setup). */
  roles?: readonly Role[];
  /** The policy role answers svc.generate from this external engine (external-policy.ts). */
  engine?: EngineOptions;
  concurrency?: number;
  /** The search role's reply delay in ms (a benchmark and testing knob; default 0). */
  searchLatencyMs?: number;
  resume?: boolean;
  dispatch?: DispatchOptions;
  device?: 'cpu' | 'webgpu' | 'cuda' | 'auto';
  threads?: number;
  inspect?: (event: InspectionEvent) => void;
  /** Every fact of the run machine tree, after it is handed to the sink. */
  onFact?: (fact: AkbeFact) => void;
  /** A rollout of the current step finished (progress bars). */
  onRollout?: (step: number, done: number, total: number) => void;
  /** The trainer finished optimizer update `done` of `total` of a step (progress bars). */
  onTrainProgress?: (step: number, done: number, total: number) => void;
  /** No rollout completed for this long while some are awaited: the run stops (default 10 min). */
  stallTimeoutMs?: number;
  /** A learner step finished: its line. */
  onStep?: (report: StepReport) => void;
  /** Hooks around the run (dev evaluation): called with the version then served. */
  beforeRun?: (ctx: RunContext) => Promise<void>;
  afterRun?: (ctx: RunContext) => Promise<void>;
  log?: (line: string) => void;
  akbeVersion?: string;
  /**
   * The orchestrator's nkey seed (its NATS credentials): every train request goes signed, and
   * the trainer roles train only on requests this key signed (events/train-signature.ts), and
   * the run's message ids are keyed by it (events/message-key.ts). Absent (an anonymous
   * connection): requests go unsigned, trainers accept them, and ids use the run's KV key.
   */
  signingSeed?: Uint8Array;
  /**
   * Which NATS servers the orchestrator's connection believed (actors/nats/nats-trust.ts), for
   * run.started.config.natsTrust: `{ tls: 'ca', caSource, caSha256 }` or `{ tls: 'insecure' }`.
   */
  natsTrust?: { [key: string]: Json };
  /** The run lock's heartbeat interval in ms (run-lock.ts; default 5 s, tests use less). */
  lockHeartbeatMs?: number;
}

export interface RunContext {
  nc: NatsConnection;
  runId: string;
  version: number;
}

export interface TrainingResult {
  runId: string;
  steps: number;
  policyVersion: number;
  elapsedSeconds: number;
  resumedFrom: { step: number; version: number } | null;
}
