/**
 * `akbe/machines`: the XState machines a run is made of (run, question, rollout, learner) and the
 * facts they report. Pure: their side effects are actors the caller provides, so a user can run
 * a rollout machine against their own policy, or inspect one with @statelyai/inspect.
 */

export type { AkbeFact, LearnerFact, QuestionFact, RolloutFact, RunFact } from './facts.js';
export { type LearnerInput, learnerMachine, type TrainRequest, type TrainResult } from './learner.js';
export {
  type QuestionInput,
  type QuestionSpec,
  questionMachine,
  rolloutIdOf,
  rolloutInputs,
} from './question.js';
export {
  type GenerateRequest,
  type RolloutInput,
  type RolloutLimits,
  rolloutMachine,
  type ToolRequest,
  type ToolResult,
} from './rollout.js';
export { type RunInput, type RunOutput, runMachine } from './run.js';
