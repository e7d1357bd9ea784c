// The watchpoints view's pure logic (views/watch/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  coverageBadge, coverageText, groupByOrigin, hitGroups, hitsSummary, originOf, paramPlaceholder, paramRange, presetMessage,
  hitBadge, rangesText, replayTitle, sourceText, specOf, verdictNote,
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

// COVERAGE entries as GET hits gives them (Coverage.to_dict of torch_2d's checks)
const NOTHING = { id: 1, status: 'unanswered', of_kind: 0, candidates: 0, checked: 0, unchecked: 0, not_applicable: 0, reasons: [], iterations: [], ranks: [] };
const WHOLE = { id: 2, status: 'complete', of_kind: 672, candidates: 672, checked: 672, unchecked: 0, not_applicable: 0, reasons: [], iterations: [0, 1, 2], ranks: [0, 1, 2, 3] };
const SOME = { id: 3, status: 'partial', of_kind: 24, candidates: 24, checked: 2, unchecked: 22, not_applicable: 0,
  reasons: [{ reason: 'needs statistic zeros', checks: 20 }, { reason: 'unreadable', checks: 1 }, { reason: 'x', checks: 1 }], iterations: [0, 1, 5], ranks: [0] };

test('iterations as runs', () => {
  assert.equal(rangesText([0, 1, 2, 5, 7, 8]), '0-2, 5, 7-8');
  assert.equal(rangesText([1, 3, 5, 7, 9], 2), '1, 3, …');
  assert.equal(rangesText([]), '');
});

test('a coverage badge and its line say what a watchpoint checked', () => {
  assert.deepEqual(coverageBadge(NOTHING), { cls: 'warn', text: 'checked nothing' });
  assert.deepEqual(coverageBadge(WHOLE), { cls: 'ok', text: 'complete' });
  assert.equal(coverageBadge({ status: 'unchecked' }), null);
  assert.equal(coverageBadge(undefined), null);
  assert.equal(coverageText(WHOLE), 'Checked 672 of 672 in iterations 0-2.');
  assert.equal(coverageText(SOME), 'Checked 2 of 24 in iterations 0-1, 5, not checked 22: needs statistic zeros (20); unreadable (1); 1 more reason.');
  assert.match(coverageText(NOTHING), /^Checked nothing: no tensor of its kinds/);
  assert.equal(coverageText({ status: 'unchecked' }), '');
});

test('no hit is never clean when a watchpoint checked nothing', () => {
  const groups = [{ id: 1, text: 'activation_saturated_layer' }, { id: 2, text: 'overflow' }, { id: 3, text: 'tensor_all_zero' }];
  const r = { total: 0, checked: [0, 1, 2], groups, coverage: [NOTHING, WHOLE], verdict: 'incomplete', coverage_status: 'incomplete' };
  assert.deepEqual(verdictNote(r), { level: 'warn', text: 'No hit, but 1 watchpoint checked nothing',
    unchecked: [{ name: 'activation_saturated_layer', why: 'Checked nothing: no tensor of its kinds in the iterations checked.' }] });
  assert.equal(hitsSummary(r, 'iteration', 2, 0), 'No hit, but 1 watchpoint checked nothing in iteration 2 · rank 0');
  assert.equal(hitsSummary(r, 'all', 2, 0), 'No hit, but 1 watchpoint checked nothing · rank 0 · 3 iterations checked');
  assert.equal(verdictNote({ ...r, total: 2, verdict: 'found' }).text, '1 watchpoint checked nothing');
  assert.equal(verdictNote({ ...r, coverage: [WHOLE], verdict: 'found' }), null);
  assert.equal(verdictNote({ ...r, coverage: [WHOLE, SOME], verdict: 'clean', coverage_status: 'partial' }).level, 'partial');
  assert.equal(verdictNote({ ...r, coverage: [WHOLE], verdict: 'clean', coverage_status: 'complete' }).level, 'clean');
  assert.equal(hitsSummary({ ...r, coverage: [WHOLE], verdict: 'clean' }, 'iteration', 2, 0), '0 hits in iteration 2 · rank 0');
});

test('whose list is in use, in words, and the replay button\'s tooltip', () => {
  const triage = { from: 'triage', preset: 'recommended', pending: false };
  assert.equal(sourceText(triage), 'from the triage: recommended');
  assert.equal(sourceText({ from: 'user' }), 'your own list');
  assert.match(replayTitle(7, triage), /\(from the triage: recommended\)/);
  assert.match(replayTitle(0, { ...triage, pending: true }), /still running/);
  assert.match(replayTitle(0, { from: 'user' }), /Add a watchpoint first/);
  assert.match(replayTitle(0, { ...triage, failed: true }), /triage failed/);
});

test('the hit badge: the count, never complete over a coverage gap, "…" while the triage runs', () => {
  const cov = (status, id = 1) => ({ id, status });
  assert.deepEqual(hitBadge(null, 2, 0, true).text, '…');
  assert.equal(hitBadge(null, 2, 0, true).state, 'pending');
  // a failed triage set no watchpoint: never the empty badge of "no hit"
  assert.deepEqual([hitBadge({ from: 'triage', failed: true }, 2, 0).text, hitBadge({ from: 'triage', failed: true }, 2, 0).state],
    ['!', 'incomplete']);
  const whole = hitBadge({ total: 3, verdict: 'found', coverage_status: 'complete', coverage: [cov('complete')], groups: [] }, 2, 0);
  assert.deepEqual([whole.text, whole.state], ['3', 'complete']);
  assert.equal(whole.title, '3 hits in iteration 2 of rank 0 (the Watchpoints tab lists them)');
  const part = hitBadge({ total: 1, verdict: 'found', coverage_status: 'partial', coverage: [cov('partial')], groups: [] }, 2, 0);
  assert.deepEqual([part.text, part.state], ['1', 'partial']);
  assert.match(part.title, /not every check could run/);
  const gap = hitBadge({ total: 2, verdict: 'found', coverage_status: 'incomplete', coverage: [cov('unanswered')], groups: [{ id: 1, text: 'w' }] }, 2, 0);
  assert.equal(gap.state, 'partial');
  const nothing = hitBadge({ total: 0, verdict: 'incomplete', coverage_status: 'incomplete', coverage: [cov('unanswered')], groups: [{ id: 1, text: 'w' }] }, 2, 0);
  assert.deepEqual([nothing.text, nothing.state], ['?', 'incomplete']);
  assert.match(nothing.title, /^No hit, but 1 watchpoint checked nothing in iteration 2 of rank 0/);
  assert.equal(hitBadge({ total: 0, verdict: 'clean', coverage_status: 'complete', coverage: [cov('complete')], groups: [] }, 2, 0), null);
});
