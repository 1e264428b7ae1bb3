/**
 * The statecharts of src/machines as plain JSON (each machine's config, functions dropped), the
 * same shape the inspector relay sends in `@xstate.actor.definition`: the actors page draws a
 * machine from either, so it can show the charts of a finished run with no relay running.
 */
import { learnerMachine } from '../machines/learner.js';
import { questionMachine } from '../machines/question.js';
import { rolloutMachine } from '../machines/rollout.js';
import { runMachine } from '../machines/run.js';

/** JSON of a machine config: functions (actions, guards, context factories) become their names, if any. */
export function definitionJson(config: unknown): unknown {
  return JSON.parse(
    JSON.stringify(config, (_k, v) => (typeof v === 'function' ? (v.name ? `fn:${v.name}` : undefined) : v)),
  );
}

export function machineDefinitions(): Record<string, unknown> {
  return Object.fromEntries(
    [runMachine, questionMachine, rolloutMachine, learnerMachine].map((m) => [
      m.id,
      definitionJson(m.config),
    ]),
  );
}
