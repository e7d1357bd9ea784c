// Edge labels (views/graph/labels.js) and a node's attached rows and neighbours (views/graph/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { labelSpots, overlaps, placeLabels } from '../../../web/static/js/views/graph/labels.js';
import { layout } from '../../../web/static/js/layout.js';
import {
  NODE_H, ROWS_MAX, attachedRows, boxHeight, childShowing, openPatch, withNeighbours,
} from '../../../web/static/js/views/graph/state.js';

const box = (id, w = 100, h = 40) => ({ id, w, h });
const asBox = (n) => [n.x, n.y, n.x + n.w, n.y + n.h];

test('boxes overlap when they share area, with a margin kept clear', () => {
  assert.ok(overlaps([0, 0, 10, 10], [5, 5, 15, 15]));
  assert.ok(!overlaps([0, 0, 10, 10], [11, 0, 20, 10]));
  assert.ok(overlaps([0, 0, 10, 10], [11, 0, 20, 10], 2));
});

test('a label first goes beside the middle of its edge, on its right', () => {
  const [first] = labelSpots([[0, 0], [0, 100]], 30, 12);
  assert.deepEqual(first, [4, 44, 34, 56]);
});

test('an edge passing beside a box through a dummy point keeps its label off that box', () => {
  // a -> c spans two layers, beside b: its middle point sits in b's layer, where the old label fell on b
  const nodes = [box('a'), box('b', 160), box('c')];
  const lay = layout(nodes, [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'a', target: 'c' }]);
  const long = lay.edges.find((e) => e.source === 'a' && e.target === 'c');
  assert.ok(long.points.length > 2);
  const labels = lay.edges.map((e) => ({ points: e.points, w: 90, h: 12 }));
  const boxes = placeLabels(labels, lay.nodes);
  for (const b of boxes) for (const n of lay.nodes) assert.ok(!overlaps(b, asBox(n)), `${b} on ${n.id}`);
});

test('labels of edges fanning out of one node do not cover each other when there is room', () => {
  const nodes = [box('s'), box('a'), box('b'), box('c')];
  const lay = layout(nodes, ['a', 'b', 'c'].map((t) => ({ source: 's', target: t })));
  const boxes = placeLabels(lay.edges.map((e) => ({ points: e.points, w: 70, h: 12 })), lay.nodes);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) assert.ok(!overlaps(boxes[i], boxes[j]), `${boxes[i]} / ${boxes[j]}`);
  }
});

test('a node grows a row per attached input, up to a "+N more" row', () => {
  const rows = (n) => Array.from({ length: n }, (_, i) => ({ node: `w${i}`, name: `w${i}`, kind: 'weight', type: '', marks: {} }));
  assert.equal(boxHeight({ type: 'node' }), NODE_H);
  assert.ok(boxHeight({ type: 'node', attached: rows(2) }) > boxHeight({ type: 'node', attached: rows(1) }));
  const many = attachedRows({ attached: rows(ROWS_MAX + 3) });
  assert.equal(many.rows.length + many.more, ROWS_MAX + 3);
  assert.equal(many.rows.length + 1, ROWS_MAX);
  assert.equal(boxHeight({ type: 'node', attached: rows(ROWS_MAX + 3) }), boxHeight({ type: 'node', attached: rows(ROWS_MAX) }));
  assert.equal(boxHeight({ type: 'scope', attached: rows(2) }), 52);
});

test('a focused node\'s neighbours become children of their own, joined to it, opening their own level', () => {
  const d = { path: 'm/fc', edges: [], children: { begin: 0, end: 1, total: 1,
    items: [{ id: 'm/fc/mm', type: 'node', attached: [{ node: 'fc.w' }], marks: {} }] },
  neighbours: { items: [{ id: 'm/relu', node: 'm/relu', type: 'node', side: 'in', place: 'm', scope: 'm' }],
    edges: [{ source: 'm/relu', target: 'm/fc/mm', count: 1, type: '' }], more: 0 } };
  const v = withNeighbours(d);
  assert.equal(v.children.items.length, 2);
  assert.equal(v.children.total, 1);
  assert.ok(v.children.items[1].ghost && v.edges[0].ghost);
  assert.deepEqual(openPatch(v.children.items[1]), { scope: 'm', node: 'm/relu' });
  assert.equal(childShowing(v.children.items, 'm/fc/mm'), 'm/fc/mm');
  assert.equal(childShowing(v.children.items, 'fc.w'), 'm/fc/mm');     // a weight: the node whose row it is
  assert.equal(childShowing(v.children.items, 'elsewhere'), null);
  const bare = { ...d, neighbours: undefined };
  assert.equal(withNeighbours(bare), bare);
});
