// The triage page's pure logic (views/triage/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { progressPercent, progressText, rankLines, stepCauses } from '../../../web/static/js/views/triage/state.js';

test('progress names the stage, with its count when it has several steps', () => {
  assert.equal(progressText({ stage: 'scan', done: 3, total: 8 }), 'Running the recommended watchpoints (3 of 8)');
  assert.equal(progressText({ stage: 'loss', done: 0, total: 1 }), 'Reading the loss');
  assert.equal(progressText({ stage: 'later', done: 0, total: 0 }), 'later');
  assert.equal(progressPercent({ done: 1, total: 3 }), 33);
  assert.equal(progressPercent({ done: 0, total: 0 }), 0);
});

test('skipped optimizer steps group by cause', () => {
  assert.deepEqual(stepCauses([{ cause: 'loss_scale_overflow', iteration: 2 }, { cause: 'optimizer_step_not_run', iteration: 5 },
    { cause: 'loss_scale_overflow', iteration: 7 }]), { loss_scale_overflow: [2, 7], optimizer_step_not_run: [5] });
});

test('ranks with equal curves share one line named after all of them: none is drawn under another', () => {
  const a = [[0, 1.5], [1, 1.25]], b = [[0, 0.5], [1, 1.0]];
  const lines = rankLines([{ rank: 0, points: a }, { rank: 1, points: a }, { rank: 2, points: b }, { rank: 3, points: b }]);
  assert.deepEqual(lines.map((l) => l.name), ['ranks 0, 1 (identical)', 'ranks 2, 3 (identical)']);
  assert.deepEqual(lines[1].points, [{ x: 0, y: 0.5 }, { x: 1, y: 1.0 }]);
  assert.deepEqual(rankLines([{ rank: 0, points: a }, { rank: 1, points: b }]).map((l) => l.name), ['rank 0', 'rank 1']);
});
