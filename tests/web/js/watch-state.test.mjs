// The watchpoints view's pure logic (views/watch/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  groupByOrigin, hitGroups, hitsSummary, originOf, paramPlaceholder, paramRange, presetMessage, specOf,
} from '../../../web/static/js/views/watch/state.js';

test('conditions group by origin, old servers\' `family` read the same', () => {
  const groups = groupByOrigin([
    { name: 'a', origin: 'mindinsight' }, { name: 'b', family: 'tdbg' }, { name: 'c', origin: 'mindinsight' }, { name: 'd', origin: 'new' }]);
  assert.deepEqual(groups.map(([t, cs]) => [t, cs.map((c) => c.name)]),
    [['MindInsight conditions', ['a', 'c']], ['tdbg', ['b']], ['new', ['d']]]);
  assert.equal(originOf({ origin: 'x', family: 'y' }), 'x');
});

test('a parameter\'s range and placeholder', () => {
  assert.equal(paramRange({ min: 0, max: 1 }), '≥ 0, ≤ 1');
  assert.equal(paramRange({ min: null, max: null }), '');
  assert.equal(paramPlaceholder({ default: 3 }), 'default 3');
  assert.equal(paramPlaceholder({ default: null, comparison: true }), 'threshold');
  assert.equal(paramPlaceholder({ default: null, comparison: false }), 'value');
});

test('a filled form keeps only what was given, trimmed', () => {
  assert.deepEqual(specOf('nan', [['abs_mean_lt', ' 1e-3 '], ['x', '  ']], ' fc1.* ', ''),
    { name: 'nan', params: { abs_mean_lt: '1e-3' }, node: 'fc1.*' });
});

test('a preset added fully, partly or not at all says so', () => {
  assert.equal(presetMessage('health', 3, 3), 'Preset health added (3 watchpoints)');
  assert.equal(presetMessage('health', 1, 3), 'Preset health: 1 added, 2 already set');
  assert.equal(presetMessage('health', 0, 3), 'Preset health is already set');
});

test('hits summary and groups', () => {
  assert.equal(hitsSummary({ total: 1 }, 'iteration', 4, 0), '1 hit in iteration 4 · rank 0');
  assert.equal(hitsSummary({ total: 5, checked: [1, 2] }, 'all', 4, 1), '5 hits · rank 1 · 2 iterations checked');
  const g = hitGroups([{ id: 1 }, { id: 2 }, { id: 3 }], [{ watchpoint_id: 3 }, { watchpoint_id: 1 }, { watchpoint_id: 3 }]);
  assert.deepEqual(g.map((x) => [x.group.id, x.hits.length]), [[1, 1], [3, 2]]);
});
