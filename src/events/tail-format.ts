/**
 * One readable line per event, for `akbe events tail`:
 *
 *   #42  07:12:03.118  rollout.completed v1  step=3 pv=3 q=q17 r=s3-q17-wt-5  with-tool reward=1 ...
 *
 * Columns: stream sequence, UTC time of `meta.at`, type and schema version, step and policy
 * version, ids, then the few fields that matter for that type.
 */
import type { AkbeEvent } from './catalog.js';

function clip(s: string, max = 48): string {
  const one = s.replace(/\s+/g, ' ');
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

const num = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(3));

export function keyData(e: AkbeEvent): string {
  switch (e.type) {
    case 'run.started':
      return `algo=${e.data.algo} world=${e.data.worldRef} policy=${e.data.policyRef} seed=${e.data.seeds.run}`;
    case 'step.started':
      return `questions=${e.data.questionIds.length}`;
    case 'question.assigned':
      return `${JSON.stringify(clip(e.data.text))} gold=${clip(e.data.goldAnswers.join('|'), 24)} G=${e.data.groupSize.withTool}+${e.data.groupSize.noTool}`;
    case 'rollout.started':
      return `${e.data.path}#${e.data.index} seed=${e.data.seed}`;
    case 'rollout.turn':
      return `turn=${e.data.turn} ${e.data.action} tokens=${e.data.tokenIds.length}`;
    case 'tool.called':
      return `${e.data.tool} turn=${e.data.turn} query=${JSON.stringify(clip(e.data.query, 32))} ${clip(JSON.stringify(e.data.record), 48)} ${num(e.data.latencyMs)}ms${e.data.error ? ` error=${clip(e.data.error, 32)}` : ''}`;
    case 'rollout.completed':
      return `${e.data.path}#${e.data.index} reward=${num(e.data.reward)} format=${e.data.formatOk ? 'ok' : 'bad'} answer=${e.data.answer === null ? '-' : JSON.stringify(clip(e.data.answer, 24))} tokens=${e.data.responseTokenIds.length} tools=${e.data.toolCalls} stop=${e.data.stopReason}`;
    case 'group.completed':
      return `wt=[${e.data.withTool.rewards.map(num).join(',')}] nt=[${e.data.noTool.rewards.map(num).join(',')}]`;
    case 'boundary.labeled':
      return `${e.data.previousCategory && e.data.previousCategory !== e.data.category ? `${e.data.previousCategory} -> ` : ''}${e.data.category} target=${e.data.targetRolloutId ?? '-'} rule=${e.data.selectionRule}`;
    case 'learner.step': {
      const m = e.data.metrics;
      return `v${e.data.policyVersionBefore}->v${e.data.policyVersionAfter} loss=${num(m.loss)} em=${num(m.em)} tc=${num(m.tc)} tp=${m.tp === null ? '-' : num(m.tp)} shifts=${m.boundaryShifts} tok/s=${Math.round(m.tokensPerSecond)}`;
    }
    case 'policy.published':
      return `v${e.data.version} ${e.data.bucket}/${e.data.checkpoint} sha256=${e.data.sha256.slice(0, 12)}`;
    case 'eval.completed': {
      const d = e.data;
      return `${d.when} v${d.version} ${d.split} em=${num(d.em)} tc=${num(d.tc)} tp=${d.tp === null ? '-' : num(d.tp)} no-tool-em=${num(d.noToolEm)} questions=${d.questions}`;
    }
    case 'run.finished':
      return `${e.data.status}${e.data.reason ? ` (${clip(e.data.reason)})` : ''} steps=${e.data.stepsCompleted} ${num(e.data.elapsedSeconds)}s`;
    default: {
      const _exhaustive: never = e;
      return String(_exhaustive);
    }
  }
}

/** The whole tail line. `seq` defaults to `meta.seq`. */
export function formatTailLine(e: AkbeEvent, seq: number | undefined = e.meta.seq): string {
  const time = new Date(Math.floor(e.meta.at)).toISOString().slice(11, 23);
  const ids = [e.meta.questionId && `q=${e.meta.questionId}`, e.meta.rolloutId && `r=${e.meta.rolloutId}`]
    .filter(Boolean)
    .join(' ');
  const head = `${`#${seq ?? '-'}`.padStart(6)}  ${time}  ${`${e.type} v${e.v}`.padEnd(21)} step=${e.meta.step} pv=${e.meta.policyVersion}`;
  return `${head}${ids ? ` ${ids}` : ''}  ${keyData(e)}`;
}
