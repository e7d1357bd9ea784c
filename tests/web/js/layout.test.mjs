// layout.js on small graphs whose right answer is known by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { layout, uniqueEdges } from '../../../web/static/js/layout.js';

const box = (id, w = 100, h = 40) => ({ id, w, h });
const byId = (lay) => Object.fromEntries(lay.nodes.map((n) => [n.id, n]));

test('a chain goes down one layer per edge, rankSep apart', () => {
  const lay = layout([box('a'), box('b'), box('c')], [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }]);
  const n = byId(lay);
  assert.equal(n.a.y, 0);
  assert.equal(n.b.y, 40 + 70);
  assert.equal(n.c.y, 2 * (40 + 70));
  assert.equal(lay.height, 3 * 40 + 2 * 70);
  assert.equal(lay.width, 100);
  for (const v of Object.values(n)) assert.equal(v.x, 0);
});

test('an edge runs from the bottom of its source to the top of its target', () => {
  const lay = layout([box('a'), box('b')], [{ source: 'a', target: 'b', count: 3 }]);
  assert.deepEqual(lay.edges, [{ source: 'a', target: 'b', count: 3, points: [[50, 40], [50, 110]], reversed: false }]);
});

test('a source sits just above its consumer, not on the top layer', () => {
  // a -> b -> c, and w (a weight) feeds only c: w is laid out on b's layer, not a's.
  const lay = layout([box('a'), box('b'), box('c'), box('w')],
    [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'w', target: 'c' }]);
  const n = byId(lay);
  assert.equal(n.w.y, n.b.y);
  assert.ok(n.w.y > n.a.y);
  // the two nodes of that layer do not overlap: at least nodeSep (26) apart
  const [l, r] = n.w.x < n.b.x ? [n.w, n.b] : [n.b, n.w];
  assert.ok(r.x - (l.x + l.w) >= 26 - 1e-9, `${l.x} ${r.x}`);
});

test('a long edge bends through one point per layer it crosses', () => {
  const lay = layout([box('a'), box('b'), box('c'), box('d')],
    [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'c', target: 'd' }, { source: 'a', target: 'd' }]);
  const long = lay.edges.find((e) => e.source === 'a' && e.target === 'd');
  assert.equal(long.points.length, 4);          // a's bottom, two dummies, d's top
  const ys = long.points.map((p) => p[1]);
  assert.deepEqual(ys, [...ys].sort((x, y) => x - y));
});

test('a cycle is broken by reversing the edge that points back in execution order', () => {
  const lay = layout([box('a'), box('b')], [{ source: 'a', target: 'b' }, { source: 'b', target: 'a' }]);
  const back = lay.edges.find((e) => e.source === 'b');
  const fwd = lay.edges.find((e) => e.source === 'a');
  assert.equal(back.reversed, true);
  assert.equal(fwd.reversed, false);
  assert.ok(byId(lay).a.y < byId(lay).b.y);
  // drawn from b to a: its points run upward
  assert.ok(back.points[0][1] > back.points[back.points.length - 1][1]);
});

test('unconnected children wrap into rows instead of one long line', () => {
  const nodes = Array.from({ length: 10 }, (_, i) => box(`n${i}`));
  const lay = layout(nodes, []);
  const rows = new Set(lay.nodes.map((n) => n.y));
  assert.equal(rows.size, 2);                  // ceil(sqrt(10 * 2.2)) = 5 per row
  assert.equal(lay.nodes.filter((n) => n.y === 0).length, 5);
});

test('duplicate edges merge with their counts summed; self loops and unknown ids drop', () => {
  const E = uniqueEdges([box('a'), box('b')], [
    { source: 'a', target: 'b', count: 2 }, { source: 'a', target: 'b' }, { source: 'a', target: 'a' },
    { source: 'a', target: 'zzz' }]);
  assert.equal(E.length, 1);
  assert.equal(E[0].count, 3);
});

test('nothing to lay out is an empty drawing', () => {
  assert.deepEqual(layout([], []), { nodes: [], edges: [], width: 0, height: 0 });
});

test('options change the spacing', () => {
  const lay = layout([box('a'), box('b')], [{ source: 'a', target: 'b' }], { rankSep: 10 });
  assert.equal(byId(lay).b.y, 50);
});
