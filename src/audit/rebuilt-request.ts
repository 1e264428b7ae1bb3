/**
 * The train request of a step rebuilt from the log alone: the batch the audit re-assembles with
 * the learner's own prepareStep, the run's loss terms and hyperparameters from run.started, laid
 * out exactly as the orchestrator sends it (src/actors/orchestrator/run-steps.ts). Its digest must
 * equal learner.step.requestSha256: the learner sent what the log says it trained on. Together
 * with the sent-vs-trained digest check (audit.ts), a trainer fed any other batch is caught
 * without re-training, and `--verify-training` can train on this very request.
 */
import { type LossConfig, lossTermsFor } from '../rl/algorithms/index.js';
import type { TrainBatch } from '../rl/batch.js';
import type { LossTerm } from '../rl/losses.js';
import { rowsPerUpdate } from '../rl/mini-batch.js';
import type { TrainStepRequest } from '../rl/train-request.js';

/** What a request needs beyond the batch, read from run.started; or why the log cannot say. */
export type RequestSettings =
  | { lr: number; epochs: number; rowsPerUpdate: number; padId: number; losses: LossTerm[] }
  | { missing: string };

/** The request's settings as the orchestrator formed them (lr, epochs, rows per update, losses). */
export function requestSettingsOf(
  cfg: Readonly<Record<string, unknown>>,
  algo: string,
  padId: number | undefined,
): RequestSettings {
  const num = (k: string) => (typeof cfg[k] === 'number' ? (cfg[k] as number) : undefined);
  const lr = num('lr');
  const epochs = num('ppoEpochs');
  const mb = num('miniBatchQuestions');
  const g = num('gWithTool');
  const absent = [
    ...(lr === undefined ? ['lr'] : []),
    ...(epochs === undefined ? ['ppoEpochs'] : []),
    ...(mb === undefined ? ['miniBatchQuestions'] : []),
    ...(g === undefined ? ['gWithTool'] : []),
    ...(padId === undefined ? ['padId'] : []),
  ];
  if (absent.length) return { missing: `run.started.config lacks ${absent.join(', ')}` };
  let losses: LossTerm[];
  try {
    losses = lossTermsFor({ ...(cfg as unknown as LossConfig), algo });
  } catch (err) {
    return { missing: `the run's loss terms cannot be rebuilt: ${(err as Error).message}` };
  }
  return { lr: lr!, epochs: epochs!, rowsPerUpdate: rowsPerUpdate(mb!, g!), padId: padId!, losses };
}

/** The step's request as the orchestrator sent it (run-steps.ts), from the re-assembled batch. */
export function rebuiltRequest(
  s: Exclude<RequestSettings, { missing: string }>,
  step: number,
  policyVersion: number,
  batch: TrainBatch,
): TrainStepRequest {
  return {
    step,
    policyVersion,
    batch,
    losses: s.losses,
    lr: s.lr,
    epochs: s.epochs,
    rowsPerUpdate: s.rowsPerUpdate,
    padId: s.padId,
  };
}
