// The graph view's pure logic (views/graph/state.js) and the pan-zoom arithmetic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  childMarks, crumbFoldMax, crumbParts, dominantKind, drawnExtent, edgePath, fitTransform, nodeClasses,
  nodeOverhang, nodeSubtitle, openPatch, pagerOf, pathParents, shortLoc, structKey, tooltipLines, triageOffer, updatePlan,
} from '../../../web/static/js/views/graph/state.js';
import { zoomAt } from '../../../web/static/js/components/panzoom.js';
import { setKinds } from '../../../web/static/js/kinds.js';

setKinds(['weight', 'gradient', 'optimizer_state', 'activation', 'other']);
const node = (over = {}) => ({ type: 'node', id: 'S/MatMul-op0', node: 'S/MatMul-op0', name: 'MatMul-op0', op_type: 'MatMul',
  kind: 'activation', marks: {}, ...over });

test('a scope path gives one crumb per level under the root', () => {
  assert.deepEqual(pathParents('A/B'), [{ name: 'root', path: '' }, { name: 'A', path: 'A' }, { name: 'B', path: 'A/B' }]);
  assert.deepEqual(pathParents(''), [{ name: 'root', path: '' }]);
});

test('a path keeps every crumb until asked to fold, then folds from the root side into one crumb', () => {
  const all = pathParents('a/b/c/d/e/f');
  assert.deepEqual(crumbParts(all), all);
  const two = crumbParts(all, 2);
  assert.deepEqual(two.map((p) => p.name), ['root', '…', 'c', 'd', 'e', 'f']);
  assert.equal(two[1].path, 'a/b');              // it opens the deepest level it hides
  assert.equal(two[1].title, 'a/b');             // and its title is that level's full path
  assert.deepEqual(two[1].levels.map((l) => l.name), ['a', 'b']);
  assert.deepEqual(two[1].levels, [{ name: 'a', path: 'a' }, { name: 'b', path: 'a/b' }]);   // its menu
});

test('the scope and its parent are never folded', () => {
  const all = pathParents('a/b/c/d/e/f');
  assert.equal(crumbFoldMax(all.length), 4);
  for (const hide of [4, 5, 99]) {
    assert.deepEqual(crumbParts(all, hide).map((p) => p.name), ['root', '…', 'e', 'f']);
  }
  assert.deepEqual(crumbParts(pathParents('a/b'), 3), pathParents('a/b'));   // nothing between root and parent
  assert.equal(crumbFoldMax(pathParents('a/b').length), 0);
});

test('a scope is drawn in its most frequent kind, other only when alone', () => {
  assert.equal(dominantKind({ weight: 2, activation: 5 }), 'activation');
  assert.equal(dominantKind({ other: 3, weight: 3 }), 'weight');
  assert.equal(dominantKind({}), 'other');
});

test('edges: a cubic between two points, quadratics through bends', () => {
  assert.equal(edgePath([[0, 0], [10, 20]]), 'M0,0 C0,10 10,10 10,20');
  assert.equal(edgePath([[0, 0], [10, 10], [20, 20]]), 'M0,0 Q10,10 15,15 L20,20');
});

test('marks, classes, subtitle and tooltip of a node with a hit and a code line', () => {
  const c = node({ marks: { hit: 2, forward: 1 } });
  assert.deepEqual(childMarks([c, node({ marks: { backward: 4 } })]), { hits: 2, line: 5 });
  assert.deepEqual(nodeClasses(c, c.id), ['gnode', 't-node', 'k-activation', 'has-hit', 'hl-forward', 'selected']);
  assert.equal(nodeSubtitle(c), 'activation');                      // the name already says MatMul
  assert.equal(nodeSubtitle(node({ name: 'fc1.weight', kind: 'optimizer_state' })), 'MatMul · optimizer state');
  assert.equal(tooltipLines(c, { iteration: 3, line: 't.py:4' }),
    'S/MatMul-op0\nMatMul · activation\n2 watchpoint hit(s) in iteration 3\nline t.py:4: 1 forward, 0 backward\nclick to inspect');
  const scope = { type: 'scope', name: 'fc1', path: 'S/fc1', count: 1, kinds: { weight: 1 }, marks: {} };
  assert.equal(nodeSubtitle(scope), '1 node');
  assert.deepEqual(nodeClasses(scope, null), ['gnode', 't-scope', 'k-weight']);
});

test('a click selects a node, opens a scope, or opens a chain of single-child scopes at its node', () => {
  assert.deepEqual(openPatch(node()), { node: 'S/MatMul-op0' });
  assert.deepEqual(openPatch({ type: 'scope', path: 'S/a' }), { scope: 'S/a' });
  assert.deepEqual(openPatch({ type: 'scope', path: 'S/a', open: 'S/a/b/c', select: 'S/a/b/c/Add-op1' }),
    { scope: 'S/a/b/c', node: 'S/a/b/c/Add-op1' });
});

test('the pager pages by 300 and knows its ends', () => {
  assert.deepEqual(pagerOf({ begin: 300, end: 600, total: 700 }), { needed: true, prev: 0, next: 600, first: false, last: false });
  assert.equal(pagerOf({ begin: 0, end: 12, total: 12 }).needed, false);
});

test('a layout fits its box, small ones centred and large ones kept readable from the top', () => {
  const small = fitTransform({ width: 100, height: 100 }, 1000, 800, 100);
  assert.equal(small.k, 1.25);
  assert.equal(small.x, (1000 - 125) / 2);
  assert.equal(small.overflows, false);
  const tall = fitTransform({ width: 200, height: 5000 }, 1000, 800, 100);
  assert.equal(tall.k, 0.8);
  assert.equal(tall.y, 44);
  assert.equal(tall.overflows, true);
});

test('a group reaches 6 px right and below its body (the stack), a hit badge 7 px up and right', () => {
  const n = { w: 120, h: 44 };
  assert.deepEqual(nodeOverhang({ type: 'group', marks: {} }, n), [0, 0, 6, 6]);
  assert.deepEqual(nodeOverhang(node({ marks: { hit: 2 } }), n), [0, 7, 7, 0]);
  assert.deepEqual(nodeOverhang(node({ marks: { forward: 1 } }), n, { pillW: 50 }), [5, 8, 5, 5]);
  assert.deepEqual(nodeOverhang(node({ marks: { forward: 1 } }), n, { pillW: 130 }), [5, 8, 18, 5]);   // a pill wider than the node
  assert.deepEqual(nodeOverhang(node(), n, { tagW: 30 }), [0, 0, 0, 7]);
  assert.deepEqual(nodeOverhang(node({ external_in: 1, external_out: 2 }), n), [0, 3, 0, 3]);
});

test('the drawn extent holds every node grown by its overhang and every extra box', () => {
  const lay = { width: 300, height: 100, nodes: [{ id: 'a', x: 0, y: 0, w: 100, h: 40 }, { id: 'g', x: 200, y: 60, w: 100, h: 40 }] };
  assert.deepEqual(drawnExtent(lay), [0, 0, 300, 100]);
  const over = new Map([['g', [0, 0, 6, 6]], ['a', [5, 7, 0, 0]]]);
  assert.deepEqual(drawnExtent(lay, over), [-5, -7, 306, 106]);
  assert.deepEqual(drawnExtent(lay, over, [[150, 50, 340, 60]]), [-5, -7, 340, 106]);
});

test('a fit of the drawn extent puts its right edge inside the box, not only the bodies', () => {
  const lay = { width: 1000, height: 100, nodes: [] };
  const extent = [0, 0, 1006, 106];
  const W = 1000, t = fitTransform(lay, W, 800, 100, extent);
  const right = t.x + extent[2] * t.k, left = t.x + extent[0] * t.k;
  assert.ok(right <= W - 20 + 1e-9, right);          // the stack's 6 px are in view
  assert.ok(left >= 20 - 1e-9, left);
  const bodies = fitTransform(lay, W, 800, 100);
  assert.ok(bodies.k > t.k);                         // fitting the bodies alone scales too far for the stack
  const snug = fitTransform({ width: 1180, height: 100, nodes: [] }, W, 800, 100);   // 944 px at 0.8: 56 px to spare
  assert.equal(snug.k, 0.8);
  assert.equal(snug.x, 28);                          // centred, not 40 px in with its right end cut
  const shifted = fitTransform(lay, W, 800, 100, [-10, -8, 990, 92]);
  assert.equal(shifted.x + -10 * shifted.k, (W - 1000 * shifted.k) / 2);   // an extent left of 0 is centred too
});

test('the info line offers the triage only with no watchpoint and some findings', () => {
  const t = { preset: 'recommended', findings: [{}, {}, {}] };
  assert.deepEqual(triageOffer(0, t), { text: 'No watchpoint set · triage found 3 problems:', preset: 'recommended' });
  assert.equal(triageOffer(0, { ...t, findings: [{}] }).text, 'No watchpoint set · triage found 1 problem:');
  assert.equal(triageOffer(2, t), null);
  assert.equal(triageOffer(0, { ...t, findings: [] }), null);
  assert.equal(triageOffer(0, null), null);
  // the triage's own list in use (still running, or found nothing to list): no offer, its hits fill in
  assert.equal(triageOffer(0, t, { from: 'triage', preset: 'recommended', pending: true }), null);
  assert.deepEqual(triageOffer(0, t, { from: 'user' }), triageOffer(0, t));
});

test('zoom keeps the point under the pointer in place, within 0.05-3', () => {
  const tf = zoomAt({ x: 10, y: 20, k: 1 }, 2, 110, 220);
  assert.deepEqual(tf, { x: -90, y: -180, k: 2 });
  assert.equal(zoomAt({ x: 0, y: 0, k: 2 }, 10, 0, 0).k, 3);
});

test('what a state change asks: reload on structure, iteration only with watchpoints', () => {
  const p = updatePlan(new Set(['scope']), 0);
  assert.equal(p.reload && p.structural && !p.resetPage, true);
  assert.equal(updatePlan(new Set(['iteration']), 0).reload, false);
  assert.equal(updatePlan(new Set(['iteration']), 2).reload, true);
  // an overlay follows the replay: a new iteration redraws its numbers, watchpoints or not
  assert.equal(updatePlan(new Set(['iteration']), 0, true).reload, true);
  assert.equal(updatePlan(new Set(['iteration']), 0, true).structural, false);
  for (const k of ['overlay', 'vsRank', 'vsDump']) {
    assert.equal(updatePlan(new Set([k]), 0).reload, true, k);
    assert.equal(updatePlan(new Set([k]), 0).picker, true, k);
  }
  const n = updatePlan(new Set(['node']), 0);
  assert.equal(n.reload, false);
  assert.equal(n.reveal, true);
  assert.equal(updatePlan(new Set(['rank']), 0).resetPage, true);
});

test('structure keys and short locations', () => {
  const d = { path: 'S', children: { begin: 0, items: [{ id: 'a' }, { id: 'b' }] }, edges: [{}] };
  assert.equal(structKey(d), 'S|0|a\nb|1');
  assert.equal(shortLoc('/home/me/train.py:14'), 'train.py:14');
});
