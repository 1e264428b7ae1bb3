import t from 'tap';
import { FINISH_REASONS as GPU_FINISH_REASONS } from '../src/gpu/stop.js';
import { storedStopReason } from '../src/machines/generate-result.js';
import { STOP_REASONS } from '../src/rl/types.js';
import { FINISH_REASONS, isFinishReason } from '../src/util/finish-reason.js';

t.test('one finish vocabulary: the decoder speaks the shared list', async (t) => {
  t.same([...FINISH_REASONS], ['stop_token', 'stop_string', 'length']);
  t.equal(GPU_FINISH_REASONS, FINISH_REASONS, 'gpu/stop.ts re-exports it, not a copy');
  for (const f of FINISH_REASONS) t.ok(isFinishReason(f), f);
  for (const old of ['eos', 'stop', 'STOP_TOKEN', '', null, 3, undefined])
    t.notOk(isFinishReason(old), `${String(old)} is not a finish reason`);
});

t.test('the generate finish maps onto the stored stop reason in one place', async (t) => {
  t.equal(storedStopReason('stop_token', 10), 'eos');
  t.equal(storedStopReason('stop_string', 10), 'eos', 'a stop string that was no tool call or answer');
  t.equal(storedStopReason('length', 10), 'length', 'cut at its token limit with budget left');
  t.equal(storedStopReason('stop_token', 0), 'length', 'the response budget is used up');
  t.equal(storedStopReason('stop_string', -1), 'length');
  for (const f of FINISH_REASONS)
    t.ok((STOP_REASONS as readonly string[]).includes(storedStopReason(f, 1)), `${f} maps into STOP_REASONS`);
  t.notOk(
    (STOP_REASONS as readonly string[]).includes('stop_token'),
    'the stored vocabulary is left as it was (old logs stay readable)',
  );
});
